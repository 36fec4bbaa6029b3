"""``rotmem.ops.registry`` is the one place that lists an op: the fakes registered for the native
operators (``torch.ops.rotmem.*``) and the Triton ones (``torch.ops.rotmem_triton.*``) are made from
its entries' shape functions, and its ``Gradient`` entries name only arguments an operator has."""

from __future__ import annotations

import pytest
import torch
from torch._library import simple_registry
from torch._library.custom_ops import OPDEFS

from rotmem.ops import registry, shapes
from rotmem.ops.registry import Gradient, Op, Operator
from tests.ops.backends import Backend


def _available(backend: str) -> str:
    """Why ``backend``'s operators are not registered here ("" when they are)."""
    return (
        Backend(backend, "cpu").skip_reason()
        if backend == "native"
        else Backend("triton", "cpu").skip_reason()
    )


def _registered_shape(namespace: str, name: str):
    """The registry shape function behind the fake torch holds for ``namespace::name``."""
    qualname = f"{namespace}::{name}"
    if qualname in OPDEFS:  # a Python custom op (Triton): its fake is held by its definition
        fake = OPDEFS[qualname]._abstract_fn
    else:  # a C++ operator: torch wraps the fake (a check of the module it came from)
        kernel = simple_registry.singleton.find(qualname).fake_impl.kernel
        assert kernel is not None, f"{qualname} has no fake"
        cells = [c.cell_contents for c in kernel.func.__closure__ or ()]
        fake = next(c for c in cells if callable(c) and hasattr(c, "shape"))
    return fake.shape


@pytest.mark.parametrize("backend", ["native", "triton"])
def test_every_operator_has_the_registry_fake(backend):
    reason = _available(backend)
    if reason:
        pytest.skip(reason)
    namespace = registry.NAMESPACES[backend]
    __import__(f"rotmem.ops.{backend}")
    found = [name for name in registry.OPERATORS if hasattr(getattr(torch.ops, namespace), name)]
    assert found, namespace
    for name in found:
        assert _registered_shape(namespace, name) is registry.OPERATORS[name][1].shape, name
        assert registry.OPERATORS[name][1].shape is getattr(shapes, name)


def test_both_backends_share_each_shape_function():
    """The operators both backends have get the same shape function (no per-backend fakes)."""
    for backend in ("native", "triton"):
        if _available(backend):
            pytest.skip(_available(backend))
    import rotmem.ops.native  # noqa: F401
    import rotmem.ops.triton  # noqa: F401

    shared = [
        n for n in registry.OPERATORS if hasattr(torch.ops.rotmem, n) and hasattr(torch.ops.rotmem_triton, n)
    ]
    assert len(shared) >= 11, shared  # every operator but the native target_scores
    for name in shared:
        assert _registered_shape("rotmem", name) is _registered_shape("rotmem_triton", name), name


def test_gradient_entries_name_real_arguments():
    """A name in ``saves`` or ``grads`` is an argument (or a named output) of the operator in one
    backend at least: a typo there would be skipped silently."""
    for backend in ("native", "triton"):
        if _available(backend):
            pytest.skip(_available(backend))
    import rotmem.ops.native  # noqa: F401
    import rotmem.ops.triton  # noqa: F401

    for name, (_, operator) in registry.OPERATORS.items():
        gradient = operator.gradient
        if gradient is None:
            continue
        names = set(gradient.outputs)
        for namespace in registry.NAMESPACES.values():
            if hasattr(getattr(torch.ops, namespace), name):
                names |= {a.name for a in registry._arguments(namespace, name)}
        unknown = [n for n in gradient.saves + gradient.grads if n not in names]
        assert not unknown, f"{name}: {unknown}"


def test_an_entry_without_a_shape_function_fails_clearly():
    with pytest.raises(
        TypeError, match=r"operator 'rotate' needs a shape function \(rotmem.ops.shapes.rotate\)"
    ):
        Op("rotate", kernels="rotate", operators=(Operator("rotate", None),))


def test_a_shape_function_reading_a_missing_argument_fails_clearly(monkeypatch):
    if _available("native"):
        pytest.skip(_available("native"))
    import rotmem.ops.native  # noqa: F401

    op, _ = registry.OPERATORS["rotate"]
    monkeypatch.setitem(registry.OPERATORS, "rotate", (op, Operator("rotate", lambda x, angle: x)))
    with pytest.raises(TypeError, match=r"reads \['angle'\], which rotmem::rotate"):
        registry.fake("rotmem", "rotate")


def test_a_gradient_reading_an_unsaved_input_fails_clearly(monkeypatch):
    if _available("native"):
        pytest.skip(_available("native"))
    import rotmem.ops.native  # noqa: F401

    op, _ = registry.OPERATORS["rotate"]
    gradient = Gradient("rotate_backward", saves=("x",), grads=("x", "theta"))
    monkeypatch.setitem(registry.OPERATORS, "rotate", (op, Operator("rotate", shapes.rotate, gradient)))
    with pytest.raises(TypeError, match=r"reads 'theta', which the Gradient's saves \('x',\) do not list"):
        registry.autograd_formula("native", "rotate")

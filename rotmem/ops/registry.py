"""The list of ``rotmem.ops``: one entry per op, and everything else derived from it.

Adding an op: write its reference, one entry here (with its shape functions, in
``rotmem.ops.shapes``, and its gradient), and its kernel files. Nothing else registers anything.

- The reference, ``rotmem.ops.reference.<name>``: its math, its signature, its docstring with the
  shapes. Every backend function has that name and signature.
- The entry, ``Op`` in ``OPS``: the module that holds its kernels in each fused backend
  (``rotmem/ops/native/<kernels>.py``, ``rotmem/ops/triton/<kernels>.py``) and one ``Operator`` per
  operator of those kernels (``torch.ops.rotmem.<name>``, schemas in ``csrc/rotmem.cpp``;
  ``torch.ops.rotmem_triton.<name>``, declared with ``kernel_op`` in the Triton module; forward and
  backward have the same names in both). An ``Operator`` names its shape function,
  ``rotmem.ops.shapes.<name>``, written once for both backends (its arguments taken by name), and,
  if it is differentiable, its ``Gradient``: the inputs and outputs saved for the backward, the
  backward operator it calls, and the inputs whose gradients that returns.
- The kernel files: the wrapper with the reference's signature, and the forward and backward
  operators (native: ``csrc/cpu/<op>.cpp``, ``csrc/cuda/<op>.cu`` and the schemas; Triton: the
  kernels and their launchers).

Derived from ``OPS``: the public, dispatched functions of ``rotmem.ops``; the function tables of
``rotmem.ops.native``, ``rotmem.ops.triton`` and ``rotmem.ops.compiled``; and, for both fused
backends, every operator's fake implementation (``fake``: registered by ``rotmem.ops.native`` and
by the Triton ``kernel_op``) and autograd formula (``register_autograd``: setup and backward made
from the ``Gradient``). ``tests/ops/test_registry.py`` checks that the registered fakes are these.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType

import torch

from rotmem.ops import reference, shapes
from rotmem.ops.table_grad import table_gradient

NAMESPACES = {"native": "rotmem", "triton": "rotmem_triton"}  # each fused backend's operators


@dataclass(frozen=True)
class Gradient:
    """How autograd differentiates an operator, the same in every backend.

    The backward runs ``backward(grad, *rest)``: ``grad`` is the gradient of the operator's first
    output, and ``rest`` is bound by name from the backward's own arguments: a name in ``saves`` (a
    tensor input or output of the forward, kept for the backward), ``need_<input>`` (whether
    autograd wants that input's gradient), or a non-tensor input of the forward (flags, sizes, which
    are always kept). The backward returns the gradients of ``grads``, in that order; the gradient of
    an input that is None, or that autograd does not want, is None.

    Where the two backends' schemas differ, ``saves`` and ``grads`` list the names of both, and an
    operator's names are those of them it has (``unrotated_query_indexed``: native ``tau, alpha,
    log_s``, Triton ``speed``).
    """

    # The operator of the backend's namespace that computes the gradients; when the backend's kernel
    # module defines a function of this name instead, that function (no kernel: it scales gradients
    # the forward made, for ``cross_entropy_all_train``).
    backward: str
    saves: tuple[str, ...]
    grads: tuple[str, ...]
    # The forward's outputs, by name ("out" for the only one), for ``saves`` and ``non_differentiable``.
    outputs: tuple[str, ...] = ("out",)
    non_differentiable: tuple[str, ...] = ()
    # ``(table, ids)``: the backward returns the gradients of the rows ``ids`` gathered from
    # ``table``; ``rotmem.ops.table_grad.table_gradient`` makes the table's gradient from them,
    # sparse when the forward's ``sparse_grad`` is true.
    gathered: tuple[tuple[str, str], ...] = ()
    # False: no zero tensors for output gradients nobody asked for (the backward gets None).
    materialize_grads: bool = True


@dataclass(frozen=True)
class Operator:
    """One operator of an op's kernels, in every fused backend's namespace under ``name``."""

    name: str
    shape: Callable  # its fake implementation: rotmem.ops.shapes.<name>, arguments taken by name
    gradient: Gradient | None = None  # None: not differentiable (a backward, counts)


@dataclass(frozen=True)
class Op:
    """One op: ``name`` is its function in ``rotmem.ops`` and in every backend module."""

    name: str
    # The module of rotmem.ops.native and rotmem.ops.triton with its kernels (several ops may share
    # one); None: no fused kernels, every backend runs the reference.
    kernels: str | None
    # Its operators (forward, backward), with their shape functions and gradients.
    operators: tuple[Operator, ...] = ()
    # Under torch.autocast its first two inputs (q [B, D], entity [N, D]) are cast to the autocast
    # dtype before dispatch, as autocast casts a matrix product's inputs (rotmem.ops.autocast_inputs).
    autocast: bool = False
    reference: Callable = field(init=False, repr=False, compare=False)
    params: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        fn = getattr(reference, self.name)
        object.__setattr__(self, "reference", fn)
        object.__setattr__(self, "params", tuple(inspect.signature(fn).parameters))
        for operator in self.operators:
            if not callable(operator.shape):
                raise TypeError(
                    f"op {self.name!r}: operator {operator.name!r} needs a shape function "
                    f"(rotmem.ops.shapes.{operator.name}), got {operator.shape!r}"
                )

    def implementation(self, backend: str) -> Callable:
        """The op's function in ``rotmem.ops.<backend>`` (``native`` or ``triton``): its kernel
        module's, or the reference for an op without kernels."""
        if self.kernels is None:
            return self.reference
        return getattr(kernel_module(backend, self.kernels), self.name)


def _ops(*names: str, **gradients: Gradient) -> tuple[Operator, ...]:
    """``Operator(name, rotmem.ops.shapes.<name>, gradients.get(name))`` for each name."""
    return tuple(Operator(name, getattr(shapes, name), gradients.get(name)) for name in names)


OPS: tuple[Op, ...] = (
    Op(
        "rotate",
        kernels="rotate",
        operators=_ops(
            "rotate",
            "rotate_backward",
            rotate=Gradient("rotate_backward", saves=("x", "theta"), grads=("x", "theta")),
        ),
    ),
    Op(
        "unrotated_query",
        kernels="unrotated_query",
        operators=_ops(
            "unrotated_query",
            "unrotated_query_backward",
            unrotated_query=Gradient(
                "unrotated_query_backward",
                saves=("h", "w", "w_hat", "theta"),
                grads=("h", "w", "w_hat", "theta"),
            ),
        ),
    ),
    Op(
        "unrotated_query_indexed",
        kernels="unrotated_query_indexed",
        operators=_ops(
            "unrotated_query_indexed",
            "unrotated_query_indexed_backward",
            unrotated_query_indexed=Gradient(
                "unrotated_query_indexed_backward",
                # native: the angle inputs tau, alpha, log_s; Triton: speed, made from them in torch
                saves=("entity", "w_table", "w_hat_table", "ent_idx", "rel_idx")
                + ("tau", "alpha", "log_s", "speed", "log_base"),
                grads=("entity", "w_table", "w_hat_table", "tau", "alpha", "log_s", "speed", "log_base"),
                gathered=(("entity", "ent_idx"),),
            ),
        ),
    ),
    Op("score_all", kernels=None, autocast=True),  # one dense product (BLAS, cuBLAS) serves every backend
    Op(
        "cross_entropy_all",
        kernels="cross_entropy",
        autocast=True,
        operators=_ops(
            "cross_entropy_all",
            "cross_entropy_all_backward",
            "cross_entropy_all_train",
            cross_entropy_all=Gradient(
                "cross_entropy_all_backward",
                saves=("q", "entity", "target", "lse"),
                grads=("q", "entity"),
                outputs=("loss", "lse"),
                non_differentiable=("lse",),
            ),
            # the forward computed the gradients (rotmem.ops.ce_tiles.grad_in_forward): scaled here
            cross_entropy_all_train=Gradient(
                "cross_entropy_all_train_backward",
                saves=("grad_q", "grad_entity"),
                grads=("q", "entity"),
                outputs=("loss", "grad_q", "grad_entity"),
                non_differentiable=("grad_q", "grad_entity"),
                materialize_grads=False,
            ),
        ),
    ),
    Op("filtered_rank_counts", kernels="rank_counts", operators=_ops("filtered_rank_counts")),
    Op("target_scores", kernels="rank_counts", operators=_ops("target_scores")),  # native only
    Op(
        "n3",
        kernels="n3",
        operators=_ops("n3", "n3_backward", n3=Gradient("n3_backward", saves=("x",), grads=("x",))),
    ),
)
NAMES: tuple[str, ...] = tuple(op.name for op in OPS)
OPERATORS: dict[str, tuple[Op, Operator]] = {o.name: (op, o) for op in OPS for o in op.operators}


def kernel_module(backend: str, kernels: str) -> ModuleType:
    """``rotmem.ops.<backend>.<kernels>``."""
    return importlib.import_module(f"rotmem.ops.{backend}.{kernels}")


def kernel_modules(backend: str) -> list[ModuleType]:
    """Every kernel module of ``backend``, once each, in ``OPS`` order."""
    names = dict.fromkeys(op.kernels for op in OPS if op.kernels is not None)
    return [kernel_module(backend, name) for name in names]


def functions(backend: str) -> dict[str, Callable]:
    """``{name: function}`` of every op in ``rotmem.ops.<backend>``: a backend module's table."""
    return {op.name: op.implementation(backend) for op in OPS}


# --- derived: the fakes and autograd formulas of both fused backends' operators ------------------


def _arguments(namespace: str, name: str) -> list[torch._C.Argument]:
    """The arguments of operator ``namespace::name`` (its schema)."""
    return list(getattr(getattr(torch.ops, namespace), name).default._schema.arguments)


def _is_tensor(argument: torch._C.Argument) -> bool:
    return str(argument.type) in ("Tensor", "Optional[Tensor]")


def fake(namespace: str, name: str) -> Callable:
    """The fake implementation of ``namespace::name``: its ``Operator.shape``, given the arguments
    it names. A shape function that needs an argument the operator lacks raises here, by name."""
    shape = OPERATORS[name][1].shape
    names = [a.name for a in _arguments(namespace, name)]
    params = inspect.signature(shape).parameters
    missing = [p for p, v in params.items() if v.default is inspect.Parameter.empty and p not in names]
    if missing:
        raise TypeError(f"rotmem.ops.shapes.{name} reads {missing}, which {namespace}::{name} {names} lacks")
    wanted = [p for p in params if p in names]

    def fake_impl(*args, **kwargs):
        bound = dict(zip(names, args, strict=False)) | kwargs
        return shape(**{p: bound[p] for p in wanted if p in bound})

    fake_impl.__name__ = fake_impl.__qualname__ = f"fake_{name}"
    fake_impl.shape = shape  # the registry's shape function (tests check it is the one registered)
    return fake_impl


def fakes(backend: str) -> dict[str, Callable]:
    """``{operator name: fake implementation}`` of every operator of ``backend``'s namespace."""
    namespace = NAMESPACES[backend]
    return {name: fake(namespace, name) for name in OPERATORS if hasattr(getattr(torch.ops, namespace), name)}


def _backward_function(backend: str, op: Op, gradient: Gradient) -> tuple[Callable, list[str]]:
    """The callable that computes the gradients, and the names of its arguments after ``grad``."""
    function = getattr(kernel_module(backend, op.kernels), gradient.backward, None)
    if function is not None:
        return function, list(inspect.signature(function).parameters)[1:]
    namespace = NAMESPACES[backend]
    return getattr(getattr(torch.ops, namespace), gradient.backward), [
        a.name for a in _arguments(namespace, gradient.backward)[1:]
    ]


def autograd_formula(backend: str, name: str) -> tuple[Callable, Callable]:
    """``(backward, setup_context)`` of operator ``name`` in ``backend``, made from its ``Gradient``."""
    op, operator = OPERATORS[name]
    gradient = operator.gradient
    arguments = _arguments(NAMESPACES[backend], name)
    names = [a.name for a in arguments]
    tensors = [a.name for a in arguments if _is_tensor(a)]
    options = [a.name for a in arguments if not _is_tensor(a)]
    outputs = gradient.outputs
    saves = [s for s in gradient.saves if s in tensors or s in outputs]
    grads = [g for g in gradient.grads if g in names]
    backward_fn, backward_args = _backward_function(backend, op, gradient)
    for arg in backward_args:
        needs = arg.startswith("need_") and arg[5:] in tensors
        if arg not in saves and arg not in options and not needs:
            raise TypeError(
                f"{backend} {name}: its backward {gradient.backward} reads {arg!r}, which the Gradient's "
                f"saves {gradient.saves} do not list (nor is it a non-tensor input or need_<input>)"
            )

    def setup_context(ctx, inputs, output):
        values = dict(zip(names, inputs, strict=True))
        values |= dict(zip(outputs, output if isinstance(output, tuple) else (output,), strict=True))
        ctx.save_for_backward(*(values[s] for s in saves))
        ctx.options = {o: values[o] for o in options}
        ctx.absent = {n for n in tensors if values[n] is None}
        if gradient.non_differentiable:
            ctx.mark_non_differentiable(*(values[o] for o in gradient.non_differentiable))
        if not gradient.materialize_grads:
            ctx.set_materialize_grads(False)

    def backward(ctx, grad, *_):
        result = [None] * len(names)
        if grad is None:  # (materialize_grads=False) no gradient reached the output
            return tuple(result)
        saved = dict(zip(saves, ctx.saved_tensors, strict=True))
        needs = dict(zip(names, ctx.needs_input_grad, strict=True))

        def arg(a: str):
            if a in saved:
                return saved[a]
            if a.startswith("need_") and a[5:] in needs:
                return needs[a[5:]]
            return ctx.options[a]

        computed = backward_fn(grad, *(arg(a) for a in backward_args))
        computed = computed if isinstance(computed, tuple | list) else (computed,)
        for g, value in zip(grads, computed, strict=True):
            if needs[g] and g not in ctx.absent:
                result[names.index(g)] = value
        for table, ids in gradient.gathered:
            i = names.index(table)
            if result[i] is not None:
                result[i] = table_gradient(result[i], saved[ids], saved[table], ctx.options["sparse_grad"])
        return tuple(result)

    return backward, setup_context


def register_autograd(backend: str) -> None:
    """Register the autograd formula of every differentiable operator of ``backend``."""
    for name, (_, operator) in OPERATORS.items():
        if operator.gradient is not None:
            backward, setup_context = autograd_formula(backend, name)
            torch.library.register_autograd(
                f"{NAMESPACES[backend]}::{name}", backward, setup_context=setup_context
            )

"""The ops' fixtures: ``backend`` (every backend of an op, ``tests/ops/backends.py``) and ``cpu_isa``
(every instruction set of the native CPU kernels). ``tests/conftest.py`` sets ``TRITON_INTERPRET=1``
when no GPU is visible, before anything imports Triton."""

from __future__ import annotations

import pytest

from tests.ops.backends import ALL_BACKENDS, CPU_ISAS


@pytest.fixture(params=CPU_ISAS)
def cpu_isa(request):
    """Runs the test once per instruction set of the native CPU kernels (``csrc/cpu/isa.h``), forced
    as ``ROTMEM_CPU_ISA`` would; a set this CPU cannot execute shows as skipped. Tests on ``cuda``
    run once (the set does not touch CUDA kernels)."""
    from rotmem.ops import native

    if not native.is_available("cpu"):
        pytest.skip(native.unavailable_reason("cpu"))
    supported = native.supported_cpu_isas()
    if request.param not in supported:
        pytest.skip(f"this CPU cannot run {request.param} (it runs {', '.join(supported)})")
    params = getattr(request.node, "callspec", None)
    if params is not None and params.params.get("device") == "cuda" and request.param != supported[0]:
        pytest.skip("the CPU instruction set does not change CUDA kernels")
    with native.forced_cpu_isa(request.param):
        yield request.param


@pytest.fixture(params=[pytest.param(case, id=str(case)) for case in ALL_BACKENDS])
def backend(request):
    """One backend of the ops (``tests/ops/backends.py``: native per CPU instruction set, native CUDA,
    Triton interpreted and on CUDA), skipped with the reason where this machine cannot run it; the
    native CPU cases run with their instruction set forced. A test that concerns some backends only
    narrows it: ``@pytest.mark.parametrize("backend", backends.params(...), indirect=True)``."""
    case = request.param
    reason = case.skip_reason()
    if reason:
        pytest.skip(reason)
    if case.isa is None:
        yield case
    else:
        with case.ops.forced_cpu_isa(case.isa):
            yield case

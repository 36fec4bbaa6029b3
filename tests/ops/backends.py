"""The backends an op's tests run on, one pytest parameter each (the ``backend`` fixture of
``conftest.py``): the native CPU kernels under each instruction set (``csrc/cpu/isa.h``: AVX-512,
AVX2, baseline SSE2), native CUDA, Triton interpreted on the CPU (``TRITON_INTERPRET=1``, which
``conftest.py`` sets when no GPU is visible) and Triton compiled on CUDA; the pure-torch reference
on the CPU and CUDA where a test asks for it (``params(names=(..., "reference"))``). A case this
machine cannot run shows as skipped, with the reason.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

import pytest
import torch

CPU_ISAS = ("avx512", "avx2", "baseline")


@dataclass(frozen=True)
class Backend:
    name: str  # "native", "triton" or "reference"
    device: str  # "cpu" or "cuda"
    isa: str | None = None  # the native CPU kernels' instruction set

    def __str__(self) -> str:
        return "-".join(filter(None, (self.name, self.device, self.isa)))

    @property
    def ops(self) -> ModuleType:
        """The backend's module: ``rotmem.ops.native``, ``rotmem.ops.triton`` or ``rotmem.ops.reference``."""
        return importlib.import_module(f"rotmem.ops.{self.name}")

    @property
    def env_name(self) -> str:
        """The backend's ``ROTMEM_BACKEND`` value (the reference is ``torch`` there)."""
        return "torch" if self.name == "reference" else self.name

    @property
    def interpreted(self) -> bool:
        """Triton on the CPU: every kernel runs in the interpreter (slow: small shapes only)."""
        return self.name == "triton" and self.device == "cpu"

    def skip_reason(self) -> str:
        """Why this machine cannot run the case ("" when it can)."""
        if self.name == "reference":
            return "" if self.device == "cpu" or torch.cuda.is_available() else "no GPU is visible"
        if self.name == "triton":
            try:
                ops = self.ops
            except ImportError as error:
                return f"Triton is not installed ({error})"
            return ops.unavailable_reason(self.device)
        native = self.ops
        if not native.is_available(self.device):
            return native.unavailable_reason(self.device)
        if self.isa is not None and self.isa not in native.supported_cpu_isas():
            return f"this CPU cannot run {self.isa} (it runs {', '.join(native.supported_cpu_isas())})"
        return ""


ALL_BACKENDS = [Backend("native", "cpu", isa) for isa in CPU_ISAS] + [
    Backend("native", "cuda"),
    Backend("triton", "cpu"),
    Backend("triton", "cuda"),
]
REFERENCE_BACKENDS = [Backend("reference", "cpu"), Backend("reference", "cuda")]


def params(
    names: tuple[str, ...] = ("native", "triton"),
    devices: tuple[str, ...] = ("cpu", "cuda"),
    per_isa: bool = True,
) -> list:
    """``pytest.param`` per backend case, for ``@pytest.mark.parametrize("backend", ..., indirect=True)``
    (a test that concerns some backends only). ``per_isa=False``: the native CPU backend once, as the
    machine runs it (for an op with no SIMD code of its own, a plain BLAS product)."""
    cases = ALL_BACKENDS + REFERENCE_BACKENDS
    if not per_isa:
        cases = [b for b in cases if b.isa is None] + [Backend("native", "cpu")]
    return [pytest.param(b, id=str(b)) for b in cases if b.name in names and b.device in devices]


def opcheck(cases: dict[str, tuple]) -> None:
    """``torch.library.opcheck`` of every case ``{name: (op, args)}`` (schema, fake implementation,
    autograd registration, AOT tracing): float inputs of a differentiable op require grad (so its
    autograd registration and backward are checked), a ``*_backward`` op's are detached. A name
    ending in ``:sparse_grad`` skips the AOT checks: a traced backward gives the dense gradient by
    design (compiled graphs take no sparse tensors), so eager (sparse) and AOT (dense) layouts
    differ there; ``tests/test_sparse_grad.py`` checks that their values agree."""
    failed = {}
    for name, (op, args) in cases.items():
        backward = name.split(":")[0].endswith("_backward")
        if backward:
            args = tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args)
        needs_grad = any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
        assert needs_grad != backward, f"{name}: inputs must require grad exactly for differentiable ops"
        sparse = name.endswith(":sparse_grad")
        utils = [u for u in torch.library._OPCHECK_DEFAULT_UTILS if not (sparse and "aot" in u)]
        result = torch.library.opcheck(op, args, test_utils=utils)
        verdicts = {test: verdict for test, verdict in result.items() if verdict != "SUCCESS"}
        if verdicts:
            failed[name] = verdicts
    assert not failed, failed


def leaf(*shape, device="cpu", dtype=torch.float32, scale=1.0, seed=0, grad=True) -> torch.Tensor:
    """Seeded normal values (drawn in float64 on the CPU) in ``dtype`` on ``device``, a leaf that
    requires grad when ``grad``."""
    g = torch.Generator().manual_seed(seed)
    t = (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(device=device, dtype=dtype)
    return t.requires_grad_(grad)

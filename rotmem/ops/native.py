"""The native backend: C++ (CPU, OpenMP) and CUDA kernels from ``csrc/``, built as ``rotmem._C``.

Same functions as ``rotmem.ops.reference``. The kernels are ``torch.ops.rotmem.*`` operators
(schemas in ``csrc/rotmem.cpp``); this module gives them their fake (shape) implementations and
autograd formulas through ``torch.library``, so ``torch.compile`` and ``torch.library.opcheck``
see them, and wraps them with the reference's signatures (broadcasting, dtype promotion).

Where the results differ from the reference by design:

- Sines, cosines and products are computed in float32 (float64 for float64 inputs) and rounded
  once to the input dtype; for bfloat16/float16 this is more accurate than the reference, which
  rounds every intermediate.
- ``cross_entropy_all`` and ``n3`` return float32, or float64 for float64 inputs (the reference
  always returns float32).
- Indices must lie in ``[0, rows)``; negative indices raise instead of wrapping around. On the CPU
  the first bad one is named at once; on CUDA the kernels check ids on the device (a host check
  would make every call wait for the GPU), so a bad id surfaces as a device-side assert naming the
  op and input, asynchronously, as with torch's own indexing (``CUDA_LAUNCH_BLOCKING=1`` pins it).

The fused cross-entropy never holds the ``[B, N]`` logits; how it tiles them, and when it computes
its gradients in the forward sweep, is ``rotmem.ops.ce_tiles``.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator, Sequence

import torch

from rotmem.ops import ce_tiles
from rotmem.ops.rank_csr import check_filter_csr, in_target_order
from rotmem.ops.table_grad import is_traced, table_gradient

_BUILD_HINT = (
    "rebuild it against the torch installed now with `pip install --no-build-isolation -e .` in the "
    "checkout (or reinstall the rotmem wheel built for this torch)"
)
try:
    from rotmem import _C
except ImportError as error:  # not built (ROTMEM_SKIP_NATIVE=1), or built against another torch
    _C = None
    _IMPORT_ERROR = str(error).splitlines()[0]
    if os.environ.get("ROTMEM_BACKEND", "").strip().lower() not in ("torch", "triton"):
        # once per process (this module is imported once); ROTMEM_BACKEND=torch says it is intended
        warnings.warn(
            f"rotmem: the native kernels (rotmem._C) did not load ({_IMPORT_ERROR}); CPU ops fall back "
            f"to the slower torch backend. To fix, {_BUILD_HINT}; to silence, set ROTMEM_BACKEND=torch.",
            RuntimeWarning,
            stacklevel=2,
        )

_REDUCTIONS = ("mean", "sum", "none")
_N3_KINDS = ("l4", "modulus3")


# --- the CPU instruction set (csrc/cpu/isa.h) -----------------------------------------------------


def cpu_isa() -> str | None:
    """The instruction set the CPU kernels' SIMD loops use now (``avx512``, ``avx2``, ``baseline``)."""
    return None if _C is None else _C.cpu_isa()


def supported_cpu_isas() -> list[str]:
    """The instruction sets this build and CPU can run, widest first (empty without the extension)."""
    return [] if _C is None else list(_C.supported_cpu_isas())


def set_cpu_isa(name: str) -> None:
    """Run the CPU kernels with ``name`` (``avx512``, ``avx2``, ``baseline``, or ``auto``: the widest).

    A set this CPU cannot execute, or an unknown name, raises ``ValueError``.
    """
    if _C is None:
        raise RuntimeError(f"the extension rotmem._C is not loaded ({_IMPORT_ERROR})")
    try:
        _C.set_cpu_isa(name)
    except ValueError as error:
        raise ValueError(f"{error}; this machine runs {supported_cpu_isas()}") from None


@contextlib.contextmanager
def forced_cpu_isa(name: str) -> Iterator[None]:
    """Run the CPU kernels with instruction set ``name`` inside the block (tests)."""
    before = cpu_isa()
    set_cpu_isa(name)
    try:
        yield
    finally:
        set_cpu_isa(before)


def _select_cpu_isa_from_environment() -> None:
    """``ROTMEM_CPU_ISA=avx512|avx2|baseline`` forces a narrower instruction set than the CPU's widest."""
    name = os.environ.get("ROTMEM_CPU_ISA", "").strip().lower()
    if name:
        try:
            set_cpu_isa(name)
        except ValueError as error:
            raise ValueError(f"ROTMEM_CPU_ISA={name!r}: {error}") from None


def is_available(device_type: str) -> bool:
    """Whether the native kernels can run on tensors of ``device_type`` (``"cpu"`` or ``"cuda"``)."""
    if _C is None:
        return False
    if device_type == "cpu":
        return True
    return device_type == "cuda" and bool(_C.WITH_CUDA) and torch.cuda.is_available()


def unavailable_reason(device_type: str) -> str:
    """Why ``is_available(device_type)`` is False, in words that say what to do."""
    if _C is None:
        return f"the extension rotmem._C did not load ({_IMPORT_ERROR}); {_BUILD_HINT}"
    if device_type == "cuda" and not _C.WITH_CUDA:
        return (
            "rotmem was built without CUDA support; rebuild where the CUDA toolkit and a CUDA build of "
            "torch are present (ROTMEM_FORCE_CUDA=1 forces it), or use ROTMEM_BACKEND=triton or torch"
        )
    if device_type == "cuda":
        return "no CUDA device is visible"
    return f"the native backend has no kernels for {device_type!r} tensors"


# --- public ops (the signatures of rotmem.ops.reference) ------------------------------------------


def rotate(x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Rotate each complex pair ``j`` of ``x [..., 2n]`` by ``theta [..., n]`` radians (broadcast)."""
    n = _pairs(x, "x")
    dtype = torch.result_type(x, theta)
    batch = torch.broadcast_shapes(x.shape[:-1], theta.shape[:-1])
    x2 = x.to(dtype).expand(*batch, 2 * n).reshape(-1, 2 * n)
    t2 = theta.to(dtype).expand(*batch, n).reshape(-1, n)
    return torch.ops.rotmem.rotate(x2, t2).view(*batch, 2 * n)


def unrotated_query(
    h: torch.Tensor, w: torch.Tensor, w_hat: torch.Tensor | None, theta: torch.Tensor
) -> torch.Tensor:
    """``Rot(Rot(h, theta) * w * w_hat, -theta)``: ``[..., 2n]``; ``w_hat=None`` is DistMult."""
    n = _pairs(h, "h")
    parts = [h, w, theta] if w_hat is None else [h, w, w_hat, theta]
    dtype = _result_type(parts)
    batch = torch.broadcast_shapes(*(t.shape[:-1] for t in parts))

    def rows(t: torch.Tensor, width: int) -> torch.Tensor:
        return t.to(dtype).expand(*batch, width).reshape(-1, width)

    q = torch.ops.rotmem.unrotated_query(
        rows(h, 2 * n), rows(w, 2 * n), None if w_hat is None else rows(w_hat, 2 * n), rows(theta, n)
    )
    return q.view(*batch, 2 * n)


def unrotated_query_indexed(
    entity: torch.Tensor,
    w_table: torch.Tensor,
    w_hat_table: torch.Tensor | None,
    ent_idx: torch.Tensor,
    rel_idx: torch.Tensor,
    tau: torch.Tensor,
    alpha: torch.Tensor,
    log_s: torch.Tensor,
    log_base: torch.Tensor,
    tau0: float,
    sparse_grad: bool = False,
) -> torch.Tensor:
    """Gather rows, compute angles on the fly and build the unrotated query: ``[*ent_idx.shape, 2n]``.

    ``entity [N, 2n]``, ``w_table``/``w_hat_table [R, 2n]`` (one dtype), ``ent_idx``/``rel_idx``
    integer ids, ``tau`` days and ``alpha`` speeds broadcasting against them, ``log_s`` and
    ``log_base`` scalars, ``tau0`` the reference day. One kernel: no ``[B, n]`` angle, cos or sin
    tensor is made. Backward also gives gradients for ``tau``, ``alpha``, ``log_s`` and
    ``log_base``. The kernels return the entity rows' gradients ``[B, 2n]``; the table's gradient
    is made from them by ``rotmem.ops.table_grad.table_gradient``: sparse with ``sparse_grad``
    (no ``[N, 2n]`` tensor), else dense. The relation rows go into zero ``[R, 2n]`` tables (on
    the CPU by a serial scatter-add, on CUDA with atomics).
    """
    n = _pairs(entity, "entity")
    for name, table in (("w_table", w_table), ("w_hat_table", w_hat_table)):
        if table is not None and (table.dtype != entity.dtype or table.shape[-1] != 2 * n):
            raise ValueError(
                f"{name} {tuple(table.shape)} {table.dtype} does not match entity [N, {2 * n}] {entity.dtype}"
            )
    shape = torch.broadcast_shapes(ent_idx.shape, rel_idx.shape, tau.shape, alpha.shape)
    q = torch.ops.rotmem.unrotated_query_indexed(
        entity,
        w_table,
        w_hat_table,
        ent_idx.long().expand(shape).reshape(-1),
        rel_idx.long().expand(shape).reshape(-1),
        tau.expand(shape).reshape(-1),
        alpha.expand(shape).reshape(-1),
        log_s.reshape(()),
        log_base.reshape(()),
        float(tau0),
        sparse_grad,
    ).view(*shape, 2 * n)
    dtype = _result_type([entity, tau, alpha, log_s, log_base])
    return q if dtype == q.dtype else q.to(dtype)


def score_all(q: torch.Tensor, entity: torch.Tensor) -> torch.Tensor:
    """``q [B, 2n] @ entity[N, 2n]^T``: ``[B, N]`` scores against every entity (one BLAS product)."""
    return q @ entity.t()


def cross_entropy_all(
    q: torch.Tensor, entity: torch.Tensor, target: torch.Tensor, reduction: str = "mean"
) -> torch.Tensor:
    """1-vs-all cross-entropy of ``q [B, 2n]`` against all of ``entity [N, 2n]``, ``target [B]``.

    Fused and tiled (``rotmem.ops.ce_tiles``). Targets equal to -100 are ignored, as in
    ``torch.nn.functional.cross_entropy``.
    """
    if q.dim() != 2 or entity.dim() != 2:
        raise ValueError(
            f"expected q [B, D] and entity [N, D], got {tuple(q.shape)} and {tuple(entity.shape)}"
        )
    block_rows, block_cols = ce_tiles.cross_entropy_blocks(q.shape[0], entity.shape[0])
    return cross_entropy_tiled(q, entity, target, reduction, block_rows, block_cols)


def filtered_rank_counts(
    q: torch.Tensor,
    entity: torch.Tensor,
    target: torch.Tensor,
    filter_ptr: torch.Tensor,
    filter_idx: torch.Tensor,
    target_score: torch.Tensor | None = None,
    entity_offset: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(higher, ties)`` int64 ``[F, B]``: the reference's counts, tile by tile, never holding ``[B, N]``
    (``csrc/rank_counts_driver.h``; tiles as the fused cross-entropy's, ``rotmem.ops.ce_tiles``)."""
    check_filter_csr(filter_ptr, filter_idx, q.shape[0])
    block_rows, block_cols = ce_tiles.cross_entropy_blocks(q.shape[0], entity.shape[0])
    return filtered_rank_counts_tiled(
        q, entity, target, filter_ptr, filter_idx, target_score, entity_offset, block_rows, block_cols
    )


def filtered_rank_counts_tiled(
    q: torch.Tensor,
    entity: torch.Tensor,
    target: torch.Tensor,
    filter_ptr: torch.Tensor,
    filter_idx: torch.Tensor,
    target_score: torch.Tensor | None,
    entity_offset: int,
    block_rows: int,
    block_cols: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``filtered_rank_counts`` with explicit tiles of ``block_rows x block_cols`` scores."""

    def count(q, target, filter_ptr, filter_idx):
        return torch.ops.rotmem.filtered_rank_counts(
            q, entity, target, target_score, filter_ptr, filter_idx, entity_offset, block_rows, block_cols
        )

    if target_score is None and block_cols < entity.shape[0]:
        return in_target_order(count, q, target.long(), filter_ptr, filter_idx)
    return count(q, target.long(), filter_ptr, filter_idx)


def target_scores(
    q: torch.Tensor, entity: torch.Tensor, target: torch.Tensor, entity_offset: int = 0
) -> torch.Tensor:
    """Each target's score ``[B]`` (float32, float64 for float64 inputs) read from the tiles
    ``filtered_rank_counts`` counts; 0 for a target outside ``entity`` (rows ``entity_offset ..``)."""
    block_rows, block_cols = ce_tiles.cross_entropy_blocks(q.shape[0], entity.shape[0])
    return torch.ops.rotmem.target_scores(q, entity, target.long(), entity_offset, block_rows, block_cols)


def n3(tensors: Sequence[torch.Tensor], kind: str = "l4") -> torch.Tensor:
    """Regulariser summed over ``tensors`` (each ``[..., 2n]``); the caller divides by batch size.

    ``"l4"``: sum of the 4th power of every real coordinate; ``"modulus3"``: sum over complex pairs
    of ``|z|^3``. One fused kernel per tensor (forward and backward).
    """
    if kind not in _N3_KINDS:
        raise ValueError(f"unknown regulariser kind {kind!r}; expected 'l4' or 'modulus3'")
    if len(tensors) == 0:
        raise ValueError("n3 needs at least one tensor")
    total = None
    for x in tensors:
        term = torch.ops.rotmem.n3(x.reshape(-1, x.shape[-1]), kind)
        total = term if total is None else total + term
    return total


# --- the cross-entropy with explicit tiles -----------------------------------------------------


def cross_entropy_tiled(
    q: torch.Tensor,
    entity: torch.Tensor,
    target: torch.Tensor,
    reduction: str,
    block_rows: int,
    block_cols: int,
) -> torch.Tensor:
    """``cross_entropy_all`` with explicit tiles of ``block_rows x block_cols`` logits."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"unknown reduction {reduction!r}; expected one of {_REDUCTIONS}")
    if q.dtype != entity.dtype:
        raise ValueError(f"q dtype {q.dtype} differs from entity dtype {entity.dtype}")
    target = target.long()
    need_q = q.requires_grad and torch.is_grad_enabled()
    need_entity = entity.requires_grad and torch.is_grad_enabled()
    if (need_q or need_entity) and reduction != "none" and ce_tiles.grad_in_forward(entity):
        loss, _, _ = torch.ops.rotmem.cross_entropy_all_train(
            q, entity, target, reduction, block_rows, block_cols, need_q, need_entity
        )
        return loss
    loss, _ = torch.ops.rotmem.cross_entropy_all(q, entity, target, reduction, block_rows, block_cols)
    return loss


# --- torch.library: fake implementations and autograd ----------------------------------------------


def _pairs(x: torch.Tensor, name: str) -> int:
    if x.dim() == 0 or x.shape[-1] % 2 or x.shape[-1] == 0:
        raise ValueError(f"{name} must be [..., 2n] with n >= 1 (split-halves complex), got {tuple(x.shape)}")
    return x.shape[-1] // 2


def _result_type(tensors: Sequence[torch.Tensor]) -> torch.dtype:
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = torch.promote_types(dtype, t.dtype)
    return dtype


def _acc_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _empty(like: torch.Tensor) -> torch.Tensor:
    return like.new_empty(0)


def _register() -> None:
    lib = "rotmem::"

    @torch.library.register_fake(lib + "rotate")
    def _(x, theta):
        return torch.empty_like(x)

    @torch.library.register_fake(lib + "rotate_backward")
    def _(grad, x, theta):
        return torch.empty_like(x), torch.empty_like(theta)

    def rotate_setup(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def rotate_backward(ctx, grad):
        x, theta = ctx.saved_tensors
        grad_x, grad_theta = torch.ops.rotmem.rotate_backward(grad, x, theta)
        return _masked(ctx, grad_x, grad_theta)

    torch.library.register_autograd(lib + "rotate", rotate_backward, setup_context=rotate_setup)

    @torch.library.register_fake(lib + "unrotated_query")
    def _(h, w, w_hat, theta):
        return torch.empty_like(h)

    @torch.library.register_fake(lib + "unrotated_query_backward")
    def _(grad, h, w, w_hat, theta):
        grad_w_hat = _empty(h) if w_hat is None else torch.empty_like(w_hat)
        return torch.empty_like(h), torch.empty_like(w), grad_w_hat, torch.empty_like(theta)

    def query_setup(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def query_backward(ctx, grad):
        h, w, w_hat, theta = ctx.saved_tensors
        grads = torch.ops.rotmem.unrotated_query_backward(grad, h, w, w_hat, theta)
        if w_hat is None:
            grads = (grads[0], grads[1], None, grads[3])
        return _masked(ctx, *grads)

    torch.library.register_autograd(lib + "unrotated_query", query_backward, setup_context=query_setup)

    @torch.library.register_fake(lib + "unrotated_query_indexed")
    def _(entity, w_table, w_hat_table, ent_idx, rel_idx, tau, alpha, log_s, log_base, tau0, sparse_grad):
        return entity.new_empty(ent_idx.shape[0], entity.shape[1])

    @torch.library.register_fake(lib + "unrotated_query_indexed_backward")
    def _(grad, entity, w_table, w_hat_table, ent_idx, rel_idx, tau, alpha, log_s, log_base, tau0):
        grad_w_hat = _empty(entity) if w_hat_table is None else torch.empty_like(w_hat_table)
        return (
            entity.new_empty(ent_idx.shape[0], entity.shape[1]),
            torch.empty_like(w_table),
            grad_w_hat,
            torch.empty_like(tau),
            torch.empty_like(alpha),
            torch.empty_like(log_s),
            torch.empty_like(log_base),
        )

    def indexed_setup(ctx, inputs, output):
        ctx.save_for_backward(*inputs[:-2])
        ctx.tau0, ctx.sparse_grad = inputs[-2:]

    def indexed_backward(ctx, grad):
        entity, w_table, w_hat_table, ent_idx, rel_idx, tau, alpha, log_s, log_base = ctx.saved_tensors
        g = torch.ops.rotmem.unrotated_query_indexed_backward(
            grad, entity, w_table, w_hat_table, ent_idx, rel_idx, tau, alpha, log_s, log_base, ctx.tau0
        )
        grad_entity = (
            table_gradient(g[0], ent_idx, entity, ctx.sparse_grad) if ctx.needs_input_grad[0] else None
        )
        grad_w_hat = None if w_hat_table is None else g[2]
        return _masked(ctx, grad_entity, g[1], grad_w_hat, None, None, g[3], g[4], g[5], g[6], None, None)

    torch.library.register_autograd(
        lib + "unrotated_query_indexed", indexed_backward, setup_context=indexed_setup
    )

    @torch.library.register_fake(lib + "cross_entropy_all")
    def _(q, entity, target, reduction, block_rows, block_cols):
        acc = _acc_dtype(q)
        loss = q.new_empty(q.shape[0], dtype=acc) if reduction == "none" else q.new_empty((), dtype=acc)
        return loss, q.new_empty(q.shape[0], dtype=acc)

    @torch.library.register_fake(lib + "cross_entropy_all_backward")
    def _(grad, q, entity, target, lse, reduction, block_rows, block_cols, need_q, need_entity):
        return (
            torch.empty_like(q) if need_q else _empty(q),
            torch.empty_like(entity) if need_entity else _empty(q),
        )

    @torch.library.register_fake(lib + "cross_entropy_all_train")
    def _(q, entity, target, reduction, block_rows, block_cols, need_q, need_entity):
        return (
            q.new_empty((), dtype=_acc_dtype(q)),
            torch.empty_like(q) if need_q else _empty(q),
            torch.empty_like(entity) if need_entity else _empty(q),
        )

    def ce_setup(ctx, inputs, output):
        q, entity, target, reduction, block_rows, block_cols = inputs
        ctx.save_for_backward(q, entity, target, output[1])
        ctx.options = (reduction, block_rows, block_cols)
        ctx.mark_non_differentiable(output[1])

    def ce_backward(ctx, grad_loss, grad_lse):
        q, entity, target, lse = ctx.saved_tensors
        need_q, need_entity = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_q, grad_entity = torch.ops.rotmem.cross_entropy_all_backward(
            grad_loss, q, entity, target, lse, *ctx.options, need_q, need_entity
        )
        return (grad_q if need_q else None, grad_entity if need_entity else None, None, None, None, None)

    torch.library.register_autograd(lib + "cross_entropy_all", ce_backward, setup_context=ce_setup)

    def train_setup(ctx, inputs, output):
        ctx.save_for_backward(output[1], output[2])
        ctx.mark_non_differentiable(output[1], output[2])
        ctx.set_materialize_grads(False)  # no zero [B, 2n] and [N, 2n] for the gradient outputs

    def train_backward(ctx, grad_loss, grad_q_out, grad_entity_out):
        grad_q, grad_entity = ctx.saved_tensors
        need_q = ctx.needs_input_grad[0] and grad_loss is not None
        need_entity = ctx.needs_input_grad[1] and grad_loss is not None
        return (
            _times(grad_q, grad_loss) if need_q else None,
            _times(grad_entity, grad_loss) if need_entity else None,
            None,
            None,
            None,
            None,
            None,
            None,
        )

    torch.library.register_autograd(
        lib + "cross_entropy_all_train", train_backward, setup_context=train_setup
    )

    @torch.library.register_fake(lib + "filtered_rank_counts")
    def _(q, entity, target, target_score, filter_ptr, filter_idx, entity_offset, block_rows, block_cols):
        shape = (filter_ptr.shape[0], q.shape[0])
        return q.new_empty(shape, dtype=torch.int64), q.new_empty(shape, dtype=torch.int64)

    @torch.library.register_fake(lib + "target_scores")
    def _(q, entity, target, entity_offset, block_rows, block_cols):
        return q.new_empty(q.shape[0], dtype=_acc_dtype(q))

    @torch.library.register_fake(lib + "n3")
    def _(x, kind):
        return x.new_empty((), dtype=_acc_dtype(x))

    @torch.library.register_fake(lib + "n3_backward")
    def _(grad, x, kind):
        return torch.empty_like(x)

    def n3_setup(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.kind = inputs[1]

    def n3_backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return torch.ops.rotmem.n3_backward(grad, x, ctx.kind), None

    torch.library.register_autograd(lib + "n3", n3_backward, setup_context=n3_setup)


def _times(grad: torch.Tensor, grad_loss: torch.Tensor) -> torch.Tensor:
    """``grad * grad_loss``, skipping the pass over ``grad`` (an ``[N, 2n]`` table) in eager CPU
    code when the output gradient is exactly 1, as it is for a loss that is the CE itself."""
    if not is_traced(grad_loss) and grad_loss.device.type == "cpu" and grad_loss.item() == 1.0:
        return grad
    return grad * grad_loss


def _masked(ctx, *grads: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
    """The gradients autograd asked for; None for the inputs that need none."""
    return tuple(g if need else None for g, need in zip(grads, ctx.needs_input_grad, strict=True))


if _C is not None:
    _select_cpu_isa_from_environment()
    _register()

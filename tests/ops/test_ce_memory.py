"""The native fused cross-entropy never holds the ``[B, N]`` logits, forward or backward.

Peak memory is measured as ``benchmarks/kernels.py`` measures it on the CPU: the growth of
memory allocated through torch's CPU allocator during one forward+backward run, from the
allocation events the PyTorch profiler records (every tensor, the native kernels' tiles
included). The eager reference, measured the same way, must exceed the logits' size (so the
measurement does see ``[B, N]`` buffers), and the fused op must stay well below it, on each code
path: gradients in the backward sweep, and gradients in the forward sweep
(``rotmem.ops.ce_tiles.grad_in_forward``) with entity chunks (two passes per row block) or with
whole-row tiles (one sweep).
"""

from __future__ import annotations

import pytest
import torch

from benchmarks.harness import cpu_peak_bytes
from rotmem.ops import ce_tiles, native, reference

pytestmark = pytest.mark.skipif(not native.is_available("cpu"), reason=native.unavailable_reason("cpu"))

B, N, DIM = 256, 50_000, 16  # DIM = 2n
LOGITS_BYTES = B * N * 4  # the float32 [B, N] logits the eager reference holds


def peak_bytes(fn, q, entity, target) -> int:
    """Peak growth of torch-allocated CPU memory (bytes) during ``fn``'s forward and backward."""
    return cpu_peak_bytes(lambda: torch.autograd.grad(fn(q, entity, target), [q, entity]))


def mib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.1f} MiB"


@pytest.fixture(scope="module")
def inputs():
    g = torch.Generator().manual_seed(0)
    q = (0.3 * torch.randn(B, DIM, generator=g)).requires_grad_()
    entity = (0.3 * torch.randn(N, DIM, generator=g)).requires_grad_()
    return q, entity, torch.randint(0, N, (B,), generator=g)


def test_the_measurement_sees_the_reference_logits(inputs):
    """The eager reference holds ``[B, N]`` logits (and more), and the measurement shows it."""
    peak = peak_bytes(reference.cross_entropy_all, *inputs)
    assert peak > LOGITS_BYTES, f"reference peak {mib(peak)} <= logits {mib(LOGITS_BYTES)}"


@pytest.mark.parametrize(
    "grad_in_forward, block_rows, block_cols",
    [(False, 32, 4096), (True, 32, 4096), (True, 4, N)],
    ids=["gradients-in-backward", "gradients-in-forward-chunked", "gradients-in-forward-one-sweep"],
)
def test_fused_cross_entropy_peak_stays_far_below_the_logits(
    inputs, monkeypatch, grad_in_forward, block_rows, block_cols
):
    """Peak memory is the gradients plus a tile, under a quarter of the logits, on every code path."""
    monkeypatch.setattr(ce_tiles, "CE_GRAD_IN_FORWARD", grad_in_forward)
    used = []

    def fused(q, entity, target):
        loss = native.cross_entropy_tiled(q, entity, target, "mean", block_rows, block_cols)
        used.append(loss.grad_fn.name())
        return loss

    peak = peak_bytes(fused, *inputs)
    op = "rotmem_cross_entropy_all_train_default" if grad_in_forward else "rotmem_cross_entropy_all_default"
    assert op in used[0], f"expected {op}'s backward, got {used[0]}"
    assert peak < LOGITS_BYTES / 4, f"fused peak {mib(peak)}, logits {mib(LOGITS_BYTES)}"

"""How the fused cross-entropy tiles its logits (``rotmem.ops.ce_tiles``), shared by native and Triton."""

from __future__ import annotations

import torch

from rotmem.ops import ce_tiles


def test_blocks_bound_the_tile(monkeypatch):
    monkeypatch.setattr(ce_tiles, "CE_TILE_ELEMENTS", 1 << 20)
    assert ce_tiles.cross_entropy_blocks(10, 5) == (10, 5)  # everything in one tile
    assert ce_tiles.cross_entropy_blocks(300, 5000) == (150, 5000)  # whole rows, two balanced blocks
    assert ce_tiles.cross_entropy_blocks(2000, 10488) == (250, 3496)  # 8 row blocks x 3 entity chunks
    for batch, entities in [(1, 1), (2000, 10488), (4096, 1_000_000), (10, 5), (300, 5000)]:
        rows, cols = ce_tiles.cross_entropy_blocks(batch, entities)
        assert 1 <= rows <= batch and 1 <= cols <= entities
        assert rows * cols <= max(1 << 20, rows), (batch, entities, rows, cols)
        assert cols == entities or rows <= ce_tiles.CE_MIN_BLOCK_ROWS


def test_gradients_move_to_backward_for_large_tables(monkeypatch):
    """By default only small tables get their gradient in the forward (it costs a second [N, 2n])."""
    monkeypatch.setattr(ce_tiles, "CE_GRAD_IN_FORWARD", None)
    monkeypatch.setattr(ce_tiles, "CE_GRAD_IN_FORWARD_MAX_BYTES", 40 * 8 * 4)
    assert ce_tiles.grad_in_forward(torch.zeros(40, 8))
    assert ce_tiles.grad_in_forward(torch.zeros(40, 8, dtype=torch.bfloat16))  # float32 gradient either way
    assert not ce_tiles.grad_in_forward(torch.zeros(41, 8))
    assert not ce_tiles.grad_in_forward(torch.zeros(40, 8, dtype=torch.float64))
    monkeypatch.setattr(ce_tiles, "CE_GRAD_IN_FORWARD", True)
    assert ce_tiles.grad_in_forward(torch.zeros(41, 8))
    monkeypatch.setattr(ce_tiles, "CE_GRAD_IN_FORWARD", False)
    assert not ce_tiles.grad_in_forward(torch.zeros(1, 2))

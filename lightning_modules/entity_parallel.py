"""Phase 2 with an entity-parallel table (``model.entity_parallel: true`` with ``trainer.strategy: ddp``).

Lightning's DDP starts the processes and the process group; ``shard_entities`` (called from
``configure_model``, before DDP wraps the module) cuts ``model.entity`` down to this rank's rows and
tells DDP to leave that parameter alone (its rows differ per rank, so averaging its gradient would be
wrong). Every rank then works on the global batch: each step gathers the ranks' micro-batches
(``global_batch``), and the loss and ranks are computed over the sharded table
(``rotmem.distributed``). The other parameters get the same full gradient on every rank, which DDP's
averaging leaves unchanged.

Checkpoints hold the whole table and its optimizer state, as one process writes them
(``save_whole_table`` brings the shards to rank 0's host memory one at a time; rank 0 writes), so a
checkpoint resumes on any number of ranks, with or without entity parallelism, and
``rotmem.load_model`` reads it. Rank 0's host memory must hold the table and its optimizer state.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from rotmem.distributed import ShardedEntityTable

ENTITY = "model.entity"


def shard_entities(module) -> ShardedEntityTable | None:
    """This rank's shard of ``module.model.entity``, or None when there is one process."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return None
    table = ShardedEntityTable.take_from(module.model)
    DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(module, [ENTITY])
    return table


def global_batch(module, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Every rank's micro-batch, concatenated in rank order (the sampler gives all the same size)."""
    return {key: module.all_gather(value).flatten(0, 1) for key, value in batch.items()}


def _entity_position(module) -> int:
    """The table's index in the optimizer's state (configure_optimizers passes self.parameters())."""
    return [name for name, _ in module.named_parameters()].index(ENTITY)


def _rewrite_row_state(checkpoint: dict[str, Any], position: int, rows: int, rewrite) -> None:
    """Replace each per-row tensor (``[rows, ...]``) of the table's optimizer state by ``rewrite(it)``.
    The state dicts are copied, not edited: ``Optimizer.state_dict()`` shares them with the live state."""
    for optimizer in checkpoint.get("optimizer_states", []):
        state = optimizer["state"].get(position)
        if state is not None:
            optimizer["state"][position] = {
                name: rewrite(value)
                if torch.is_tensor(value) and value.dim() > 0 and value.shape[0] == rows
                else value
                for name, value in state.items()
            }


def save_whole_table(module, table: ShardedEntityTable, checkpoint: dict[str, Any]) -> None:
    """In ``on_save_checkpoint`` (every rank): the whole table and its per-row optimizer state."""
    checkpoint["state_dict"][ENTITY] = table.full().cpu()
    _rewrite_row_state(
        checkpoint,
        _entity_position(module),
        table.shard.rows,
        lambda v: table.full(v.to(table.weight.device)).cpu(),
    )


def load_my_rows(module, table: ShardedEntityTable, checkpoint: dict[str, Any]) -> None:
    """In ``on_load_checkpoint``: this rank's rows of the whole table and of its optimizer state."""
    full = checkpoint["state_dict"][ENTITY]
    if full.shape[0] != table.shard.total:
        raise ValueError(
            f"checkpoint's entity table has {full.shape[0]} rows, this graph {table.shard.total}"
        )
    checkpoint["state_dict"][ENTITY] = table.mine(full)
    _rewrite_row_state(checkpoint, _entity_position(module), table.shard.total, table.mine)

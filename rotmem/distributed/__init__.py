"""Beyond one device: entity-parallel tables (rows of the entity table sharded over ranks, the 1-vs-all
cross-entropy and the filtered ranking combined with all-reduce) and the helpers data-parallel
training needs (gathering evaluation ranks without the sampler's padding).

Everything here runs on ``torch.distributed`` (gloo on the CPU, NCCL on GPUs) inside a process
group someone else started (Lightning, ``torchrun``, or a test's ``torch.multiprocessing``).
"""

from rotmem.distributed.entity_parallel import (
    ShardedEntityTable,
    ShardedRanking,
    entity_parallel_loss,
    local_facts,
    with_entity_rows,
)
from rotmem.distributed.shards import EntityShard

__all__ = [
    "EntityShard",
    "ShardedEntityTable",
    "ShardedRanking",
    "entity_parallel_loss",
    "local_facts",
    "with_entity_rows",
]

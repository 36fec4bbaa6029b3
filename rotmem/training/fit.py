"""``fit``: Phase 2 as a plain torch loop (no Lightning) over one ``train_step``."""

from __future__ import annotations

from collections.abc import Callable

import torch

from rotmem.data import TemporalKG
from rotmem.data.negatives import SlotDays, negative_times
from rotmem.models import TemporalKGE
from rotmem.training.config import TrainConfig
from rotmem.training.optimizer import build_optimizer
from rotmem.training.step import train_step


def fit(
    model: TemporalKGE,
    kg: TemporalKG,
    config: TrainConfig,
    on_epoch: Callable[[int, float], bool | None] | None = None,
) -> list[float]:
    """Train ``model`` on ``kg.train`` for ``config.epochs``: one seeded permutation per epoch
    (``config.seed``), the time term's negative days from ``rotmem.data.negatives`` (when weighted and
    the facts span enough days), ``train_step`` per batch. ``on_epoch(epoch, mean_loss)`` runs after
    each epoch (1-based; the model is in train mode again after it), and training stops early when it
    returns True (a validation check, a tuner's pruning). Returns each epoch's mean loss; the model is
    left in eval mode."""
    facts = kg.train.to(model.entity.device)
    if facts.shape[0] == 0:
        raise ValueError("no facts to fit")
    saved_threads = torch.get_num_threads()
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    try:
        return _epochs(model, facts, kg.num_relations, config, on_epoch)
    finally:
        torch.set_num_threads(saved_threads)
        model.eval()


def _epochs(
    model: TemporalKGE,
    facts: torch.Tensor,
    num_relations: int,
    config: TrainConfig,
    on_epoch: Callable[[int, float], bool | None] | None,
) -> list[float]:
    optimizer = build_optimizer(model.parameters(), config.optimizer, config.lr)
    generator = torch.Generator().manual_seed(config.seed)
    day_range = (int(facts[:, 3].min()), int(facts[:, 3].max()))
    # distinct negative days need a span of more days than negatives
    timed = config.objective.time_weight > 0 and 0 < config.num_negative_times <= day_range[1] - day_range[0]
    slots = SlotDays(facts.cpu(), num_relations) if timed else None
    model.train()
    history = []
    for _ in range(config.epochs):
        order = torch.randperm(facts.shape[0], generator=generator).to(facts.device)
        losses = []
        for start in range(0, facts.shape[0], config.batch_size):
            batch = {"facts": facts[order[start : start + config.batch_size]]}
            if timed:
                days = negative_times(
                    slots, batch["facts"].cpu(), config.num_negative_times, generator, day_range=day_range
                )
                batch["negative_days"] = days.to(facts.device)
            step = train_step(model, batch, config.objective, optimizer, config.sigma_years, config.clip_norm)
            losses.append(step)
        # one read-back per epoch; summed in float64 in batch order
        history.append(sum(torch.stack(losses).tolist()) / len(losses))
        if on_epoch is not None:
            stop = on_epoch(len(history), history[-1])
            model.train()
            if stop:
                break
    return history

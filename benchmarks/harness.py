"""What the kernel and training benchmarks share: the training step they time, the CPU's peak memory,
the demo config's model with its history term, and a quiet Lightning trainer.
"""

import warnings
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile

from rotmem.ops import reference
from rotmem.ops.table_grad import gather_rows

TAU0 = 12784.0  # 2005-01-01 in days since 1970-01-01: ICEWS05-15's first day
REGULARIZER_WEIGHT = 0.01


def demo_module(kg, batch_size: int, dim: int, history: bool = True, drop_last: bool = False, **family):
    """``(data module, Phase2Module)``: the demo config's family (``RoMemComplEx`` at ``dim``,
    ``family``: its other settings, weights drawn after ``torch.manual_seed(0)``) with its history term
    (unless ``history`` is False) and its regularisers (N3 1e-3, smoothness 1), trained on ``kg`` in
    batches of ``batch_size`` facts without negative days (so no time term)."""
    from lightning_modules.kg_data import TemporalKGDataModule
    from lightning_modules.phase2 import Phase2Module
    from rotmem.models import HistorySpec, RoMemComplEx

    data = TemporalKGDataModule(kg=kg, batch_size=batch_size, num_negative_times=0, drop_last=drop_last)
    torch.manual_seed(0)
    shape = dict(tau0=data.tau0, num_days=data.num_days, dim=dim)
    model = RoMemComplEx(data.num_entities, data.num_relations, **shape, **family)
    objective = dict(regularizer="modulus3", regularizer_weight=1e-3, smoothness_weight=1.0, time_weight=0.0)
    slots, pairs, rules = (1, 3, 7, 30, 90, 365), (1, 3, 7, 30), (0, 1, 2, 3, 5, 7, 14, 30)  # the demo's
    spec = HistorySpec(slot_windows=slots, pair_windows=pairs, rule_windows=rules) if history else None
    return data, Phase2Module(model, history=spec, **objective)


def quiet_trainer(root: str, **settings):
    """A Lightning trainer without logger, checkpoints, progress bar, summary or validation, on one
    device (``settings`` override: ``max_epochs``, ``accelerator``, ``callbacks``, ...); Lightning's
    warning that a data loader has few workers silenced."""
    import pytorch_lightning as pl

    warnings.filterwarnings("ignore", ".*does not have many workers.*")
    quiet = dict(logger=False, enable_checkpointing=False, enable_progress_bar=False, limit_val_batches=0)
    quiet |= dict(enable_model_summary=False, default_root_dir=root, devices=1, accelerator="cpu")
    return pl.Trainer(**(quiet | settings))


def step(ops, entity, w, w_hat, alpha_logit, log_s, log_base, h, r, t, tau, sparse=None) -> torch.Tensor:
    """``½(CE_tail + CE_head) + 0.01 · N3 / B`` of one batch (``h, r, t [B]``, ``tau [B]`` days):
    both directions' queries in one fused call, the cross-entropy over all entities, N3 over the
    batch's rows; ``alpha_logit [R]`` learned speeds. ``ops``: a backend module. ``sparse``: the
    entity rows' gradients sparse (default: for the fused backends, as ``rotmem.losses`` does)."""
    sparse = ops is not reference if sparse is None else sparse
    alpha = torch.sigmoid(alpha_logit[r])
    ht, rr = torch.cat([h, t]), torch.cat([r, r])
    angle = (torch.cat([tau, tau]), torch.cat([alpha, alpha]), log_s, log_base, TAU0)
    candidates = torch.ops.aten.alias(entity) if sparse else entity  # see losses.one_vs_all_loss
    queries = ops.unrotated_query_indexed(entity, w, w_hat, ht, rr, *angle, sparse_grad=sparse)
    loss = ops.cross_entropy_all(queries, candidates, torch.cat([t, h]))
    rows = [gather_rows(entity, ht, sparse), w.index_select(0, r), w_hat.index_select(0, r)]
    return loss + REGULARIZER_WEIGHT * ops.n3(rows) / h.shape[0]


def cpu_peak_bytes(fn: Callable[[], object]) -> int:
    """Peak growth (bytes) of torch-allocated CPU memory during ``fn()``, from the profiler's
    allocator events: every tensor, including those native and compiled code allocate."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    cpu = torch._C._autograd.DeviceType.CPU
    events = [
        e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]" and e.device_type() == cpu
    ]
    current = peak = 0
    for event in sorted(events, key=lambda e: e.start_ns()):
        current += event.nbytes()
        peak = max(peak, current)
    return peak

"""What the kernel benchmarks share: the training step they time, and how they time it.

``step`` is one Phase-2 objective as ``rotmem.losses`` computes it, written once for
``kernels.py`` (op ``step``) and ``native_step.py``. ``interleaved`` times providers round by
round, one call each in turn, so a change in load on a shared machine hits every provider alike:
only ratios measured side by side in one run are meaningful there.
"""

from __future__ import annotations

import csv
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from rotmem.ops import reference
from rotmem.ops.table_grad import gather_rows

TAU0 = 12784.0  # 2005-01-01 in days since 1970-01-01: ICEWS05-15's first day
REGULARIZER_WEIGHT = 0.01


def step(
    ops,
    entity: torch.Tensor,
    w: torch.Tensor,
    w_hat: torch.Tensor,
    alpha_logit: torch.Tensor,
    log_s: torch.Tensor,
    log_base: torch.Tensor,
    h: torch.Tensor,
    r: torch.Tensor,
    t: torch.Tensor,
    tau: torch.Tensor,
    sparse: bool | None = None,
) -> torch.Tensor:
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


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def interleaved(
    timers: dict[str, Callable[[], float]],
    rounds: int,
    warmup: int = 0,
    on_error: Callable[[str, Exception], None] | None = None,
) -> dict[str, list[float]]:
    """Milliseconds of ``rounds`` timed calls of each timer (each returns the ms it measured), after
    ``warmup`` untimed ones, one call per provider in turn. With ``on_error``, a provider that raises
    is reported to it and dropped (the others go on); without, the error propagates."""
    live = dict(timers)
    times: dict[str, list[float]] = {name: [] for name in timers}
    for i in range(warmup + rounds):
        for name in list(live):
            try:
                ms = live[name]()
            except Exception as error:
                if on_error is None:
                    raise
                on_error(name, error)
                del live[name]
                continue
            if i >= warmup:
                times[name].append(ms)
    return {name: times[name] for name in live}


def timed(fn: Callable[[], object], device: str = "cpu") -> float:
    """Milliseconds of one call of ``fn`` (waiting for the GPU at both ends)."""
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return (time.perf_counter() - start) * 1e3


def percentile(times: list[float], q: int) -> float:
    """The ``q``-th percentile (inclusive method); the value itself for one time."""
    if len(times) < 2:
        return times[0]
    return statistics.quantiles(times, n=100, method="inclusive")[q - 1]


def command_line(module: str, argv: list[str] | None) -> str:
    """The command that ran the benchmark ``module`` (``benchmarks.kernels``) with ``argv`` (the
    process's arguments when None), for its CSV and summary."""
    args = sys.argv[1:] if argv is None else argv
    return shlex.join(["python", "-m", module, *args])


def write_rows(path: Path, rows: list[dict], command: str) -> None:
    """``rows`` (one dict per row, the first one's keys as the header) to the CSV ``path``, each with
    a last column ``command``: the command that made them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[*rows[0], "command"])
        writer.writeheader()
        writer.writerows({**row, "command": command} for row in rows)
    print(f"wrote {path}")

"""Scale on the CPU: training throughput and memory per rank for 1 vs 2 processes, and evaluation
time and memory as the number of entities grows (method and figures: docs/scale.md).

    python -m benchmarks.scale                         # both sections (about 15 minutes on 2 cores)
    python -m benchmarks.scale --sections eval --quick # or train; small sizes: a smoke run
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.scale (from the checkout's root)")

import argparse
import os
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from benchmarks.runner import Benchmark, Row, add_threads, comma_list, save, subplots, timed

FIELDS = (
    "section", "graph", "entities", "dim", "mode", "ranks", "threads_per_rank", "batch", "steps",
    "seconds", "facts_per_s", "table_grad_state_mb_per_rank", "peak_rss_mb_per_rank",
    "evaluator", "queries", "eval_batch", "peak_alloc_mb", "load_1min",
)  # fmt: skip


@dataclass(frozen=True)
class TrainSpec:
    graph: str  # "icews05-15" or "synthetic-<N>"
    entities: int
    relations: int
    dim: int
    k: int
    batch: int  # global, facts
    steps: int
    mode: str  # "one", "ddp", "entity-parallel"
    world: int
    threads: int


def training_facts(spec: TrainSpec) -> tuple[torch.Tensor, float]:
    """``(facts [(steps + 1) * batch, 4], tau0)``: the batches every run sees, in order."""
    need = (spec.steps + 1) * spec.batch
    if spec.graph == "icews05-15":
        from rotmem import load_dataset

        kg = load_dataset("icews05-15")
        return kg.train[:need].clone(), float(kg.first_day)
    from rotmem.data.large_synthetic import SyntheticGraph

    graph = SyntheticGraph(spec.entities, spec.relations, seed=0)
    return torch.from_numpy(graph.facts(0, need)), float(graph.first_day)


def train_worker(rank: int, spec: TrainSpec, folder: str) -> None:
    torch.set_num_threads(spec.threads)
    if spec.world > 1:
        rendezvous = f"file://{folder}/rendezvous"
        dist.init_process_group("gloo", init_method=rendezvous, rank=rank, world_size=spec.world)
    from rotmem.distributed import ShardedEntityTable, entity_parallel_loss
    from rotmem.losses import Objective, embedding_regularizer
    from rotmem.models.romem import RoMem
    from rotmem.training import build_optimizer, phase2_loss

    facts, tau0 = training_facts(spec)
    torch.manual_seed(0)
    model = RoMem(spec.entities, spec.relations, dim=spec.dim, k=spec.k, tau0=tau0)
    table = ShardedEntityTable.take_from(model) if spec.mode == "entity-parallel" else None

    objective = Objective(regularizer_weight=0.01)  # no negative days: no time term

    class Loss(torch.nn.Module):  # DDP hooks in through a module's forward
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, batch: torch.Tensor) -> torch.Tensor:
            if table is not None:
                regularizer = lambda m, f: {"reg": embedding_regularizer(m, f)}
                return objective.total(entity_parallel_loss(model, table, batch, regularizer))
            return phase2_loss(model, {"facts": batch}, objective, sigma_years=0.5)[0]

    loss_of = torch.nn.parallel.DistributedDataParallel(Loss()) if spec.mode == "ddp" else Loss()
    optimizer = build_optimizer(model.parameters(), "adagrad", 0.1)

    def step(i: int) -> None:
        batch = facts[i * spec.batch : (i + 1) * spec.batch]
        if spec.mode == "ddp":  # each rank its share; DDP averages the gradients in backward
            batch = batch[rank :: spec.world]
        loss = loss_of(batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    step(0)  # warm-up: allocations, Adagrad state
    if spec.world > 1:
        dist.barrier()
    start = time.perf_counter()
    for i in range(1, spec.steps + 1):
        step(i)
    if spec.world > 1:
        dist.barrier()
    seconds = time.perf_counter() - start
    entity = model.entity
    state = optimizer.state[entity]["sum"]
    grad = entity.grad.to_dense() if entity.grad.is_sparse else entity.grad
    held = sum(t.numel() * t.element_size() for t in (entity, grad, state))
    result = {
        "seconds": seconds,
        "facts_per_s": spec.batch * spec.steps / seconds,
        "table_grad_state_mb_per_rank": held / 2**20,
        "peak_rss_mb_per_rank": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    torch.save(result, Path(folder) / f"rank{rank}.pt")
    if spec.world > 1:
        dist.barrier()  # no rank tears gloo down while its peer still works
        del loss_of, optimizer, model, table  # DDP's reducer holds the group
        dist.destroy_process_group()
    # A spawned child finalises the interpreter on exit, and a static destructor there met a still
    # joinable thread once in ~20 runs ("terminate called without an active exception", SIGABRT on
    # rank 0 after its result was saved). The result is on disk: leave without finalising.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_training(spec: TrainSpec) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        mp.start_processes(train_worker, (spec, folder), nprocs=spec.world, start_method="spawn")
        ranks = [torch.load(Path(folder) / f"rank{r}.pt") for r in range(spec.world)]
    worst = dict(seconds=max, facts_per_s=min, table_grad_state_mb_per_rank=max, peak_rss_mb_per_rank=max)
    return {key: pick(r[key] for r in ranks) for key, pick in worst.items()}


def train_section(args) -> Iterator[dict]:
    from rotmem.data.registry import find_dataset

    icews = find_dataset("icews05-15") is not None and not args.quick
    sizes = [
        ("icews05-15" if icews else "synthetic-10488", 10488, 251 if icews else 20, 500, 3, 1000, 3),
        ("synthetic-1000000", 1_000_000, 20, 128, 1, 256, 2),
    ]
    if args.quick:
        sizes = [("synthetic-2000", 2000, 20, 32, 1, 64, 1)]
    for graph, entities, relations, dim, k, batch, steps in sizes:
        for mode, world, threads in (("one", 1, 2), ("ddp", 2, 1), ("entity-parallel", 2, 1)):
            spec = TrainSpec(graph, entities, relations, dim, k, batch, steps, mode, world, threads)
            print(f"train {asdict(spec)}", flush=True)
            yield dict(section="train", graph=graph, entities=entities, dim=dim, mode=mode, ranks=world,
                       threads_per_rank=threads, batch=batch, steps=steps, **run_training(spec))  # fmt: skip


def eval_section(args) -> Iterator[dict]:
    """Fused and eager evaluation of 500 test facts of synthetic graphs of growing N (eager in batches
    of ``min(1000, 10^8 / N)`` queries): seconds and the growth of torch-allocated memory."""
    from benchmarks.harness import cpu_peak_bytes
    from rotmem.data import TemporalKG
    from rotmem.data.large_synthetic import SyntheticGraph
    from rotmem.evaluation import FILTERS, evaluate_all
    from rotmem.evaluation.ranking import answer_filters
    from rotmem.models.romem import RoMem

    sizes = (10_000, 30_000, 100_000, 300_000, 1_000_000) if not args.quick else (1000, 3000)
    dim, k, test_facts = (500, 3, 500) if not args.quick else (32, 1, 100)
    for entities in sizes:
        graph = SyntheticGraph(entities, 20, seed=0)
        facts = torch.from_numpy(graph.facts(0, 200_000 + test_facts))
        names = [f"e{i}" for i in range(entities)], [f"r{i}" for i in range(20)]
        kg = TemporalKG(f"synthetic-{entities}", *names, facts[:200_000], facts[:0], facts[200_000:])
        model = RoMem(entities, 20, dim=dim, k=k, tau0=float(graph.first_day))
        answer_filters(kg, FILTERS)  # the filter index is made once, before timing
        for fused in (True, False):
            batch = 1000 if fused else min(1000, 10**8 // entities)
            run = partial(evaluate_all, model, kg, "test", FILTERS, batch, fused=fused)
            yield dict(section="eval", graph=kg.name, entities=entities, dim=dim, mode="one", ranks=1,
                       threads_per_rank=args.threads, seconds=timed(run) / 1e3,
                       evaluator="fused" if fused else "eager", queries=2 * test_facts, eval_batch=batch,
                       peak_alloc_mb=cpu_peak_bytes(run) / 2**20)  # fmt: skip


def plot(rows: list[dict], path: Path) -> None:
    fig, (left, right) = subplots(1, 2, figsize=(11, 4))
    for evaluator, marker in (("fused", "o"), ("eager", "s")):
        points = [(r["entities"], r["seconds"]) for r in rows if r["evaluator"] == evaluator]
        left.plot([n for n, _ in points], [s for _, s in points], marker=marker, label=evaluator)
    left.set(xscale="log", yscale="log", xlabel="entities N", ylabel="seconds (1000 queries, both filters)")
    left.set_title("evaluation time vs N")
    left.legend()
    train = [r for r in rows if r["section"] == "train"]
    bars = right.bar(range(len(train)), [r["facts_per_s"] for r in train])
    for bar, r in zip(bars, train, strict=True):
        mb = f"{r['table_grad_state_mb_per_rank']:.0f} MB"
        right.annotate(mb, (bar.get_x(), bar.get_height()), fontsize=7)
    labels = [f"{r['graph']}\n{r['mode']} x{r['ranks']}" for r in train]
    right.set_xticks(range(len(train)), labels, fontsize=6)
    title = "training step, 2 threads in all (MB: table+grad+state)"
    right.set(yscale="log", ylabel="facts / s", title=title)
    save(fig, path)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sections", type=comma_list(("train", "eval")), default="train,eval")
    add_threads(parser, default=2)  # the evaluation section's
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")


def measure(args: argparse.Namespace) -> Iterator[Row]:
    for section, rows in (("train", train_section), ("eval", eval_section)):
        for row in rows(args) if section in args.sections else ():
            row |= {"load_1min": round(os.getloadavg()[0], 2)}
            yield {f: round(v, 3) if isinstance(v := row.get(f, ""), float) else v for f in FIELDS}


SPEC = Benchmark("scale", __doc__, measure, add_arguments, plot=plot, out_dir=True, partial=True,
                 csv_name=lambda args: "scale_quick" if args.quick else "scale")  # fmt: skip

if __name__ == "__main__":
    SPEC.main()

"""``rotmem demo``: train RoMem, print its MRR and a few answers that show geometric shadowing.

Trains on ICEWS05-15 when the data is found (``--data-dir`` or ``$ROTMEM_DATA_DIR``), else on the
built-in synthetic KG, whose true answers are known. On ICEWS05-15 it trains the race's best
RoMem config (``icews05-15-romem-complex-rules``: the rotation on ComplEx with the history term and
its rule counts, docs/accuracy.md) for ``ICEWS_EPOCHS`` epochs, about 8 minutes on 2 cores;
``--config icews05-15-chronor-dim128`` (once ``icews05-15-cpu``) trains the paper's CPU preset.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rotmem import configs

ICEWS_CONFIG = "icews05-15-romem-complex-rules"
ICEWS_EPOCHS = 2  # 0.678 time-aware test MRR after 2 epochs (`make demo` in a fresh clone, commit 9120e23)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="train on the synthetic KG (or ICEWS05-15 if found) and query it")
    p.add_argument("--data", default=None, help="'synthetic' or 'icews05-15' (default: ICEWS if found)")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--config", default=None, help=f"config name or file (ICEWS default: {ICEWS_CONFIG})")
    p.add_argument("--epochs", type=int, default=None, help=f"epochs (ICEWS default: {ICEWS_EPOCHS})")
    p.add_argument("--out", default="runs/demo", help="folder for logs and checkpoints")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rotmem.extras import require_training

    require_training("rotmem demo")
    from lightning_modules.cli import run_lightning_cli
    from rotmem import evaluate, load_model
    from rotmem.data import find_dataset, load_dataset

    data = args.data or ("icews05-15" if find_dataset("icews05-15", args.data_dir) else "synthetic")
    if data != "synthetic" and not Path(data).is_dir() and find_dataset(data, args.data_dir) is None:
        load_dataset(data, args.data_dir)  # raises the error that says where it looked, before any work
    config = configs.resolve(args.config or ("synthetic" if data == "synthetic" else ICEWS_CONFIG))
    epochs = args.epochs or (ICEWS_EPOCHS if data != "synthetic" and not args.config else None)
    argv = ["fit", "--config", str(config), "--data.dataset", data]
    argv += ["--trainer.default_root_dir", args.out, "--trainer.logger.init_args.save_dir", args.out]
    if args.data_dir:
        argv += ["--data.data_dir", args.data_dir]
    if epochs:
        argv += ["--trainer.max_epochs", str(epochs), "--trainer.check_val_every_n_epoch", str(epochs)]
    ensure_gate(config, data, args.data_dir)
    print(f"rotmem demo: training on {data} with {config.name} (logs in {args.out})", flush=True)
    cli = run_lightning_cli(argv)
    ckpt = cli.trainer.checkpoint_callback.best_model_path or cli.trainer.checkpoint_callback.last_model_path
    model = load_model(ckpt)
    kg = cli.datamodule.kg
    print(f"\nbest checkpoint: {ckpt}")
    for name in ("time-aware", "static"):
        m = evaluate(model, kg, "test", filter=name)
        print(
            f"test ({name:10s} filter): MRR {m['mrr']:.3f}  H@1 {m['hits@1']:.3f}  "
            f"H@3 {m['hits@3']:.3f}  H@10 {m['hits@10']:.3f}"
        )
    if data == "synthetic":
        show_synthetic_answers(model)
    else:
        show_slot_answers(model, kg)
    return 0


def ensure_gate(config: Path, data: str, data_dir: str | None) -> None:
    """Run Phase 1 (``rotmem gate pretrain``) first when the config's gate file does not exist."""
    import yaml

    from rotmem.cli import run

    model = yaml.safe_load(config.read_text()).get("model", {})
    family = model.get("family") or {}
    if (family.get("init_args") or {}).get("speed") != "gate":
        return
    gate_path = Path(model["gate_path"]).expanduser()
    if gate_path.is_file():
        return
    print(f"rotmem demo: no gate at {gate_path}; pretraining it (Phase 1) first", flush=True)
    argv = ["gate", "pretrain", "--data", data, "--out", str(gate_path.parent)]
    run(argv + (["--data-dir", data_dir] if data_dir else []))


def _top(model, scores, k: int = 3) -> list[str]:
    return [model.entities[i] for i in scores.topk(k).indices.tolist()]


def show_synthetic_answers(model) -> None:
    """Who held a relation on a given day, beside the generator's ground truth."""
    import torch

    from rotmem.data import date_of, synthetic_kg

    truth = synthetic_kg()
    today = truth.last_day
    homes: dict[str, list] = {}
    for iv in truth.intervals:
        if iv.relation == "lives in":
            homes.setdefault(iv.subject, []).append(iv)
    movers = [sorted(ivs, key=lambda iv: iv.start) for ivs in homes.values() if len(ivs) >= 2][:3]
    print("\nWho held this relation on day X (model's top 3; * = the true holder then):")
    for stints in movers:
        person, before = stints[-1].subject, stints[-2]
        for day in (today, (before.start + before.end) // 2):  # now, then inside the previous stint
            answer = truth.holder(person, "lives in", day)
            _print_query(model, person, "lives in", day, answer, date_of(day))
        born = truth.holder(person, "born in", today)
        _print_query(model, person, "born in", truth.first_day + 100, born, date_of(truth.first_day + 100))
    country = "country_0"
    for day in (today, truth.first_day + 300):
        president = truth.subject_of("president of", country, day)
        h = model.relation_ids(["president of"])
        t = model.entity_ids([country])
        scores = model.score_heads(h, t, torch.tensor([float(day)]))[0]
        top = ", ".join(("*" if e == president else "") + e for e in _top(model, scores))
        print(f"  (?, president of, {country}) on {date_of(day)}: {top}")


def _print_query(model, subject: str, relation: str, day: int, answer: str, date: str) -> None:
    import torch

    h, r = model.entity_ids([subject]), model.relation_ids([relation])
    scores = model.score_tails(h, r, torch.tensor([float(day)]))[0]
    top = ", ".join(("*" if e == answer else "") + e for e in _top(model, scores))
    print(f"  ({subject}, {relation}, ?) on {date}: {top}")


def show_slot_answers(model, kg) -> None:
    """For test slots whose tail changes over time: the top answers at two of its days."""
    import torch

    from rotmem.data import date_of

    test = kg.test
    slots: dict[tuple[int, int], dict[int, int]] = {}
    for h, r, t, day in test.tolist():
        slots.setdefault((h, r), {})[day] = t
    changing = sorted(slots.items(), key=lambda kv: -len(set(kv[1].values())))[:3]
    print("\nWho held this relation on day X (model's top 3; * = the test fact's tail):")
    for (h, r), by_day in changing:
        days = sorted(by_day)
        for day in (days[0], days[-1]):
            scores = model.score_tails(torch.tensor([h]), torch.tensor([r]), torch.tensor([float(day)]))[0]
            answer = kg.entities[by_day[day]]
            top = ", ".join(("*" if e == answer else "") + e for e in _top(model, scores))
            print(f"  ({kg.entities[h]}, {kg.relations[r]}, ?) on {date_of(day)}: {top}")

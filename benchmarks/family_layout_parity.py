"""Does a packaged config train the same model after the move of the family's arguments into
``model.family`` (class and ``init_args``) as before it? Every Phase-2 config trains a few steps on
a small synthetic graph, seeded, on one thread, in this checkout and in an earlier commit
(``--before``, exported with ``git archive``); the losses of every step and the final weights are
compared bit for bit.

    python benchmarks/family_layout_parity.py --before f52e1f5

Writes ``benchmarks/results/family_layout_parity.csv``: one row per config with the steps, whether
the losses and the weights are equal, the largest weight difference and the command.
"""

from __future__ import annotations

import argparse
import csv
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytorch_lightning as pl

ROOT = Path(__file__).resolve().parent.parent
LAYERED = {
    "icews05-15-chronor-dim128+ablation-learned-alpha": [
        "icews05-15-chronor-dim128",
        "ablation-learned-alpha",
    ]
}


class LossRecord(pl.Callback):
    """Keeps each training step's loss (``losses``)."""

    def __init__(self):
        self.losses = []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.losses.append(outputs["loss"].detach().clone())


def worker(out: Path, graph: Path, steps: int) -> None:
    """Train each config ``steps`` steps in this process's checkout; save losses and weights."""
    from unittest import mock

    import torch
    import yaml

    from lightning_modules.cli import RoMemCLI
    from lightning_modules.kg_data import TemporalKGDataModule
    from lightning_modules.phase2 import Phase2Module
    from rotmem import configs

    torch.set_num_threads(1)  # one thread: the sums of sparse gradients in one order
    nested = (Path(configs.__file__).parent.parent.parent / "lightning_modules/family_settings.py").is_file()
    speed = "--model.family.speed" if nested else "--model.speed"
    names = [n for n in configs.names() if not n.startswith(("gate-", "ablation-"))]
    results = {}
    for name in [*names, *LAYERED]:
        paths = [configs.resolve(n) for n in LAYERED.get(name, [name])]
        args = [arg for path in paths for arg in ("--config", str(path))]
        merged = {}
        for path in paths:
            merged = configs.merge(merged, yaml.safe_load(path.read_text()))
        model = merged["model"]
        if (model.get("family", {}).get("init_args", {}) if nested else model).get("speed") == "gate":
            args += [speed, "constant", "--model.gate_path", "null"]  # no pretrained gate here
        args += ["--data.dataset", str(graph), "--data.batch_size", "64"]
        with mock.patch("sys.argv", ["rotmem"]):
            cli = RoMemCLI(
                Phase2Module, TemporalKGDataModule, args=args, run=False, save_config_callback=None
            )
        trainer = pl.Trainer(
            max_steps=steps,
            accelerator="cpu",
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            limit_val_batches=0,
            num_sanity_val_steps=0,
            gradient_clip_val=cli.config.get("trainer", {}).get("gradient_clip_val"),
            callbacks=[record := LossRecord()],
        )
        trainer.fit(cli.model, datamodule=cli.datamodule)
        state = {k: v.detach().clone() for k, v in cli.model.model.state_dict().items() if torch.is_tensor(v)}
        results[name] = {"losses": torch.stack(record.losses), "state": state}
    torch.save(results, out)


def run_worker(tree: Path, out: Path, graph: Path, steps: int) -> None:
    env = dict(os.environ, PYTHONPATH=str(tree), OMP_NUM_THREADS="1")
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", str(out), str(graph), str(steps)]
    subprocess.run(command, cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="f52e1f5", help="the commit to compare with")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/family_layout_parity.csv"))
    args = parser.parse_args()
    import torch

    from rotmem.data import synthetic_kg
    from rotmem.data.arrays import save_arrays

    with tempfile.TemporaryDirectory(prefix="rotmem-parity-") as scratch:
        scratch = Path(scratch)
        graph = scratch / "graph"
        save_arrays(synthetic_kg(num_people=30, num_cities=6, num_companies=4, num_countries=3).kg, graph)
        before = scratch / "before"
        before.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.before], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive.stdout, check=True)
        for library in (ROOT / "rotmem").glob("_C*.so"):  # the native kernels: csrc/ is the same
            shutil.copy(library, before / "rotmem")
        run_worker(before, scratch / "before.pt", graph, args.steps)
        run_worker(ROOT, scratch / "after.pt", graph, args.steps)
        old, new = torch.load(scratch / "before.pt"), torch.load(scratch / "after.pt")
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True)
    command = shlex.join(["python", "benchmarks/family_layout_parity.py", *sys.argv[1:]])
    rows = []
    for name in old:
        a, b = old[name], new[name]
        diff = max((a["state"][k].double() - b["state"][k].double()).abs().max().item() for k in a["state"])
        same = a["state"].keys() == b["state"].keys() and all(
            torch.equal(a["state"][k], b["state"][k]) for k in a["state"]
        )
        rows.append(
            dict(
                config=name,
                steps=len(a["losses"]),
                losses_equal=torch.equal(a["losses"], b["losses"]),
                weights_equal=same,
                max_weight_diff=diff,
                before=args.before,
                after=commit.stdout.decode().strip(),
                command=command,
            )
        )
        print(
            f"{name:50s} losses equal {rows[-1]['losses_equal']}, weights equal {same} (max diff {diff:.3g})"
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return 0 if all(r["losses_equal"] and r["weights_equal"] for r in rows) else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(main())

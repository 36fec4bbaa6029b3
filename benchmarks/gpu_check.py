"""The GPU check, 4 minutes at most on one GPU, build included, so that a second try fits in a
15-minute lease. Every step has its own time limit (then SIGKILL, rc 124) and log, and its figures go
to OUT/summary.txt as soon as it ends (a cut lease still returns what finished); a failed step does
not stop the others. The exit code is 1 when a step failed or timed out.

  step      limit  what
  (wheels)      8  install the carried wheels (Lightning's CLI parser, ninja, Liger-Kernel, Cut
                   Cross-Entropy); then 3 s to ask nvidia-smi which GPU is there
  build        90  the native extension with its CUDA kernels (for the visible GPU; ninja, all cores)
  env           7  rotmem env: python, torch, CUDA, triton, the GPU; rotmem._C and its CUDA kernels
                   (nvidia-smi's GPU, nvcc, ninja and CUDA_HOME head the summary)
  tests        45  the GPU subset of the op tests (pytest --gpu-subset: every CUDA case of each op
                   at its first 3 parametrizations, every error test)
  eval         15  a full ICEWS05-15 test evaluation per GPU backend, cold and warm, then the CPU;
                   the rank-count op's ms per batch (importable from the checkout whatever the build did)
  epoch        48  icews05-15-romem-complex-rules (the demo): one epoch and its validation, batches and
                   history counts made by 8 loader workers; a torch.profiler table of 20 steps and the
                   syncs torch.cuda.set_sync_debug_mode reports in them
  kernels      15  the step and the cross-entropy, float32 / TF32 / bfloat16, every provider (eager,
                   compile, native, triton, linear, liger, cce), as far as 10 s of measuring reach
  total       231  (the steps are killed at their limit; tests/test_gpu_check_dry_run.py adds them up)

  python -m benchmarks.gpu_check --prepare     # HERE, with the registry: .whl/ and .gpu_data/ to carry
  python -m benchmarks.gpu_check               # on the GPU; results under $OUT, else results/gpu_check
  python -m benchmarks.gpu_check --dry-run     # on the CPU: every step's command line parses and starts
  python -m benchmarks.gpu_check --steps tests,kernels     # a subset of the steps above

On the GPU machine, carry=[".whl", ".gpu_data"]: the wheels go to /tmp/site, the data is read from
.gpu_data/ unless ROTMEM_DATA_DIR is set. How the dry run starts the steps: benchmarks/README.md.
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.gpu_check (from the checkout's root)")

import argparse
import atexit
import contextlib
import importlib
import importlib.util
import os
import re
import resource
import runpy
import shlex
import shutil
import signal
import site
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.runner import ROOT, comma_list

STEPS = ("build", "env", "tests", "eval", "epoch", "kernels")
# The libraries the steps import, heaviest first: pytorch_lightning with its imports (transformers,
# tensorboard), torch, torch._dynamo (through rotmem.ops.backend), pytest and hypothesis (the tests
# step's collection), matplotlib (the kernel benchmark's chart). Third-party only.
SHARED = ("torch", "torch._dynamo", "triton", "pytorch_lightning", "jsonargparse", "pytest", "hypothesis",
          "matplotlib")  # fmt: skip
# Versions that pass the test suite with pytorch-lightning 2.6.6 (the GPU image's); pure Python.
WHEELS = ("jsonargparse==4.53.0", "docstring-parser==0.18.0", "typeshed-client==2.15.0", "ninja==1.11.1.4",
          "liger-kernel==0.8.5", "cut-cross-entropy==25.1.1")  # fmt: skip


@dataclass
class Step:
    """A command with its time limit, environment, and what of its output goes to the summary:
    ``(file, regex, keep)`` per report, the last ``keep`` matches (``file`` None: the step's log)."""

    name: str
    limit_s: float
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    reports: list[tuple[Path | None, str, int]] = field(default_factory=list)


def plan(python: str, out: Path, dry: bool, device: str) -> list[Step]:
    """The six steps, in their dry form with ``dry``: pip's --dry-run (setup.py runs, compiles nothing),
    pytest's --collect-only, the evaluation's --dry-run, LightningCLI's --print_config (every argument
    parsed), the kernel benchmark's --budget-s 0 on the CPU (parse, plan, measure nothing)."""
    o = shlex.quote(str(out))
    xdist = "-n 8" if importlib.util.find_spec("xdist") else ""  # Triton compiles in several processes
    runs = shlex.quote(f"{os.environ.get('TMPDIR', '/tmp')}/gpu_check_runs")  # logs, checkpoints: not in OUT
    kernels = "--device cpu --quick --budget-s 0"
    if device == "cuda":
        kernels = "--device cuda --dtype float32,tf32,bfloat16 --ops step,cross_entropy_all --reps 20 "
        kernels += "--shapes icews --budget-s 10"
    max_jobs = os.environ.get("MAX_JOBS", str(os.cpu_count()))  # ninja's jobs in the build
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    kernel_lines = r"^.*(?:forward\+backward|^FAILED|^skipped|^provider).*$"

    def step(name: str, limit_s: float, args: str, dry_flag: str = "", env=None, reports=()) -> Step:
        """The step that runs ``python ARGS`` (``ARGS DRY_FLAG`` in the dry run)."""
        argv = [python, *shlex.split(f"{args} {dry_flag if dry else ''}")]
        return Step(name, limit_s, argv, env or {}, list(reports))

    return [
        step("build", 90, "-m pip install --no-index --disable-pip-version-check --no-deps "
             "--no-build-isolation -e .", "--dry-run", {"MAX_JOBS": max_jobs}),
        step("env", 7, "-m rotmem.env", reports=[(None, "^.+$", 100)]),
        step("tests", 45, "-m pytest tests/ops tests/test_sparse_grad.py -q -p no:cacheprovider "
             f"-m 'not slow' -rfE --gpu-subset --ignore tests/ops/test_triton_aot.py {xdist}",
             "--collect-only", reports=[(None, "^.*(?:passed|failed|error|collected).*$", 1)]),
        # the evaluation imports from the checkout, whatever the build did
        step("eval", 15, f"-m benchmarks.eval_speed --device cuda --out {o}/eval.csv", "--dry-run",
             {"PYTHONPATH": pythonpath}, [(None, "^.*(?:MRR|rank counts).*$", 100)]),
        step("epoch", 48, "-m rotmem.cli fit --config icews05-15-romem-complex-rules --trainer.max_epochs 1 "
             "--trainer.check_val_every_n_epoch 1 --trainer.enable_progress_bar true --data.num_workers 8 "
             "--trainer.callbacks+=lightning_modules.step_profile.StepProfile "
             f"--trainer.callbacks.init_args.out {o}/profile.txt --trainer.logger.init_args.save_dir {runs}",
             "--print_config", reports=[(None, "[0-9.]*it/s|[0-9.]*s/it|val/time-aware/mrr[^,]*", 2),
                                        (out / "profile.txt", "^.*training steps from step.*$", 100)]),
        step("kernels", 15, f"-m benchmarks.kernels {kernels} --out-dir {o}",
             reports=[(out / f"kernels_{device}.md", kernel_lines, 100), (None, kernel_lines, 100)]),
    ]  # fmt: skip


def runs_in_process(argv: list[str], python: str | None) -> bool:
    """Whether ``argv`` is ``PYTHON -m MODULE ...``, ``PYTHON -c CODE ...`` or ``PYTHON SCRIPT ...``."""
    if argv[0] != python or len(argv) < 2:
        return False
    return len(argv) > 2 if argv[1] in ("-m", "-c") else not argv[1].startswith("-")


def run_python(args: list[str]) -> int:
    """What ``python ARGS`` does, in this process: ``-m MODULE``, ``-c CODE`` or ``SCRIPT``; returns the
    exit status the interpreter would give."""
    try:
        if args[0] == "-m":
            sys.argv, sys.path[0] = ["-m", *args[2:]], os.getcwd()
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        elif args[0] == "-c":
            sys.argv, sys.path[0] = ["-c", *args[2:]], ""
            exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__"})
        else:
            sys.argv, sys.path[0] = list(args), str(Path(args[0]).resolve().parent)
            runpy.run_path(args[0], run_name="__main__")
    except SystemExit as error:  # the status of raise SystemExit(code)
        if error.code is None or isinstance(error.code, int):
            return error.code or 0
        print(error.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


def start(step: Step, python: str | None, out: Path) -> int:
    """Fork a child that runs ``step``'s command with its output in ``OUT/NAME.log``, in the child's
    own process when ``python`` names the interpreter it starts (the dry run); returns its pid."""
    sys.stdout.flush()
    sys.stderr.flush()
    if pid := os.fork():
        return pid
    try:
        os.setpgid(0, 0)
        os.environ.update(step.env)
        fd = os.open(out / f"{step.name}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        argv = step.argv
        if not runs_in_process(argv, python):
            try:
                os.execvp(argv[0], argv)
            except OSError as error:
                print(f"gpu_check: cannot run {argv[0]}: {error}", file=sys.stderr)
                os._exit(127)
        rc = run_python(argv[1:])
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()  # as an interpreter's exit would (loggers, temporary files)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        os._exit(rc)
    finally:
        os._exit(1)


def run_all(steps: list[Step], python: str | None, out: Path, jobs: int, done=None) -> dict[str, str]:
    """Run every step, ``jobs`` at a time (``python``: see ``start``); ``{name: "RC in S s"}``, also
    written to ``OUT/NAME.result``; ``done(step, result)`` as each ends."""
    waiting, running, results = list(steps), {}, {}
    while waiting or running:
        while waiting and len(running) < jobs:
            step = waiting.pop(0)
            running[start(step, python, out)] = (step, time.monotonic())
        time.sleep(0.05)
        for pid, (step, started) in list(running.items()):
            finished, status = os.waitpid(pid, os.WNOHANG)
            seconds = time.monotonic() - started
            if not finished and seconds <= step.limit_s:
                continue
            with contextlib.suppress(ProcessLookupError):  # past its limit, or what the step left behind
                os.killpg(pid, signal.SIGKILL)
            if not finished:
                os.waitpid(pid, 0)
            result = str(os.waitstatus_to_exitcode(status)) if finished else "124 (timed out)"
            results[step.name] = f"{result} in {seconds:.1f} s"
            (out / f"{step.name}.result").write_text(results[step.name] + "\n")
            print(f"{step.name}: rc={results[step.name]}", flush=True)
            del running[pid]
            if done is not None:
                done(step, results[step.name])
    return results


def report(step: Step, out: Path) -> list[str]:
    """The step's figures: the last ``keep`` matches of each of its reports."""
    lines = []
    for path, pattern, keep in step.reports:
        path = path or out / f"{step.name}.log"
        text = path.read_text(errors="replace") if path.is_file() else ""
        lines += re.findall(pattern, text, re.MULTILINE)[-keep:]
    return [f"tests: {line}" for line in lines] if step.name == "tests" else lines


def prepare(python: str) -> int:
    """Put in the checkout, in folders git ignores, what the GPU machine lacks and cannot fetch (about
    32 MB of the 64 MiB a device call carries): ``.whl/`` (the wheels above) and ``.gpu_data/`` (a copy
    of ICEWS05-15 from $ROTMEM_DATA_DIR, else ../shared/data)."""
    shutil.rmtree(ROOT / ".whl", ignore_errors=True)
    platforms = [f"--platform={p}" for p in ("manylinux_2_28_x86_64", "manylinux_2_12_x86_64", "any")]
    download = [python, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                "-d", ROOT / ".whl", "--python-version", "3.12", "--implementation", "cp",
                *platforms, *WHEELS]  # fmt: skip
    subprocess.run(download, check=True)
    data = Path(os.environ.get("ROTMEM_DATA_DIR", ROOT.parent / "shared" / "data")) / "icews05-15"
    if not (data / "train.txt").is_file():
        print(f"no ICEWS05-15 under {data.parent}: set ROTMEM_DATA_DIR (the epoch step will fail)")
    else:
        shutil.rmtree(ROOT / ".gpu_data", ignore_errors=True)
        shutil.copytree(
            data, ROOT / ".gpu_data" / "icews05-15", ignore=shutil.ignore_patterns("*.pt", "*.npy")
        )
    for folder in (".whl", ".gpu_data"):  # a device call carries only what git ignores
        if subprocess.run(["git", "-C", ROOT, "check-ignore", "-q", folder]).returncode:
            raise SystemExit(f"{folder} is not ignored by git")
    print('now: run(command="python3 -m benchmarks.gpu_check", carry=[".whl", ".gpu_data"], timeout_s=600)')
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="on the CPU: every step parses and starts")
    parser.add_argument("--steps", type=comma_list(STEPS), default=",".join(STEPS))
    parser.add_argument(
        "--out", type=Path, default=Path(os.environ.get("OUT", ROOT / "benchmarks/results/gpu_check"))
    )
    parser.add_argument(
        "--python", default=os.environ.get("PYTHON", "python3"), help="the steps' interpreter"
    )
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="dry-run steps at once")
    parser.add_argument("--prepare", action="store_true", help="only write .whl/ and .gpu_data/ to carry")
    args = parser.parse_args(argv)
    if args.prepare:
        return prepare(args.python)
    os.chdir(ROOT)
    out, started = args.out.resolve(), time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    summary = out / "summary.txt"
    summary.write_text("")

    def note(line: str) -> None:
        print(line, flush=True)
        with summary.open("a") as handle:
            handle.write(line + "\n")

    if wheels := sorted(str(p) for p in (ROOT / ".whl").glob("*.whl")):  # what the machine lacks
        pip = [args.python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
               "--no-cache-dir", "--upgrade", "--target", "/tmp/site", *wheels]  # fmt: skip
        if subprocess.run(pip, timeout=8).returncode == 0:
            os.environ["PYTHONPATH"] = os.pathsep.join(
                filter(None, ["/tmp/site", os.environ.get("PYTHONPATH")])
            )
            os.environ["PATH"] = f"/tmp/site/bin{os.pathsep}{os.environ['PATH']}"
            site.addsitedir("/tmp/site")  # for the dry run's children, which this process starts
        note(f"installed to /tmp/site: {' '.join(Path(w).name for w in wheels)}")
    # the machine as the build will see it (the env step: as rotmem sees it)
    query = ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"]
    smi = subprocess.run(query, capture_output=True, text=True, timeout=3) if shutil.which(query[0]) else None
    gpu = not args.dry_run and smi is not None and smi.returncode == 0
    note(f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ} {smi.stdout.strip() if smi else 'no nvidia-smi'}")
    note(
        f"nvcc {shutil.which('nvcc')}, ninja {shutil.which('ninja')}, CUDA_HOME={os.environ.get('CUDA_HOME')}"
    )
    data = os.environ.get("ROTMEM_DATA_DIR") or (
        ".gpu_data" if Path(".gpu_data").is_dir() else "../shared/data"
    )
    if Path(data).is_dir():
        os.environ["ROTMEM_DATA_DIR"] = str(Path(data).resolve())
    steps = plan(args.python, out, args.dry_run, "cuda" if gpu else "cpu")
    steps = [s for s in steps if s.name in args.steps]
    failed = []

    def done(step: Step, result: str) -> None:
        log = out / f"{step.name}.log"
        print("\n".join(log.read_text(errors="replace").splitlines()[-15:]) if log.is_file() else "")
        note(f"== {step.name}: rc={result}")
        failed.extend([step.name] * (not result.startswith("0 ")))
        for line in report(step, out):
            note(line)

    for step in steps:
        note(f"== {step.name} (limit {step.limit_s:g}s): {shlex.join(step.argv)}")
    if args.dry_run:
        for name in SHARED:
            with contextlib.suppress(ImportError):
                importlib.import_module(name)
    run_all(steps, args.python if args.dry_run else None, out, args.jobs if args.dry_run else 1, done)
    if args.dry_run:
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
        note(f"dry run: {len(steps)} steps in {time.monotonic() - started:.1f} s wall, {cpu:.1f} s CPU")
    note(f"everything is under {out} ({summary})" + (f"; {len(failed)} step(s) failed" if failed else ""))
    return int(bool(failed))


if __name__ == "__main__":
    sys.exit(main())

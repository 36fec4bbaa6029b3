"""The dry run of ``benchmarks/gpu_check.sh``: every step's command line, started in one Python process.

    python -m benchmarks.gpu_check_dry_run --python PYTHON --out OUT QUEUE

QUEUE: NUL-terminated words, per step NAME, LIMIT (s), ARGC, then the command's ARGC words.
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.gpu_check_dry_run (from the checkout's root)")

import argparse
import atexit
import contextlib
import importlib
import os
import resource
import runpy
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

# The libraries the steps import, heaviest first (CPU seconds on one slow core): pytorch_lightning
# with its imports (transformers, tensorboard: ~9), torch (~4), torch._dynamo (~3, through
# rotmem.ops.backend), pytest and hypothesis (the tests step's collection), matplotlib (the kernel
# benchmark's chart). Third-party only: the project's modules are each step's to import.
SHARED = ("torch", "torch._dynamo", "triton", "pytorch_lightning", "jsonargparse", "pytest", "hypothesis",
          "matplotlib")  # fmt: skip


@dataclass
class Step:
    name: str
    limit_s: float
    argv: list[str]


def read_queue(path: Path) -> list[Step]:
    """The steps of a queue file (NUL-terminated words: NAME, LIMIT, ARGC, ARGV...)."""
    words = path.read_bytes().decode().split("\0")[:-1]
    steps = []
    while words:
        name, limit, argc, *words = words
        steps.append(Step(name, float(limit), words[: int(argc)]))
        words = words[int(argc) :]
    return steps


def runs_in_process(argv: list[str], python: str) -> bool:
    """Whether ``argv`` is ``PYTHON -m MODULE ...``, ``PYTHON -c CODE ...`` or ``PYTHON SCRIPT ...``."""
    if argv[0] != python or len(argv) < 2:
        return False
    return len(argv) > 2 if argv[1] in ("-m", "-c") else not argv[1].startswith("-")


def run_python(args: list[str]) -> None:
    """What ``python ARGS`` does, in this process: ``-m MODULE``, ``-c CODE`` or ``SCRIPT``."""
    if args[0] == "-m":
        sys.argv, sys.path[0] = ["-m", *args[2:]], os.getcwd()
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    elif args[0] == "-c":
        sys.argv, sys.path[0] = ["-c", *args[2:]], ""
        exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__"})
    else:
        sys.argv, sys.path[0] = list(args), str(Path(args[0]).resolve().parent)
        runpy.run_path(args[0], run_name="__main__")


def exit_code(error: SystemExit) -> int:
    """The exit status the interpreter gives ``raise SystemExit(code)``."""
    if error.code is None or isinstance(error.code, int):
        return error.code or 0
    print(error.code, file=sys.stderr)
    return 1


def child(step: Step, python: str, log: Path) -> None:
    """In the forked child: run ``step``'s command with its output in ``log``; never returns."""
    os.setpgid(0, 0)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    if not runs_in_process(step.argv, python):
        try:
            os.execvp(step.argv[0], step.argv)
        except OSError as error:
            print(f"gpu_check_dry_run: cannot run {step.argv[0]}: {error}", file=sys.stderr)
            os._exit(127)
    rc = 0
    try:
        run_python(step.argv[1:])
    except SystemExit as error:
        rc = exit_code(error)
    except BaseException:
        traceback.print_exc()
        rc = 1
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()  # as an interpreter's exit would (loggers, temporary files)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    os._exit(rc)


def start(step: Step, python: str, out: Path) -> int:
    """Fork the child that runs ``step``; returns its pid."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            child(step, python, out / f"{step.name}.log")
        finally:
            os._exit(1)
    return pid


def run_all(steps: list[Step], python: str, out: Path, jobs: int) -> dict[str, str]:
    """Run every step, ``jobs`` at a time; ``{name: "RC in S s"}``, also written to ``OUT/NAME.result``."""
    waiting, running, results = list(steps), {}, {}
    while waiting or running:
        while waiting and len(running) < jobs:
            step = waiting.pop(0)
            running[start(step, python, out)] = (step, time.monotonic())
        time.sleep(0.05)
        for pid, (step, started) in list(running.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            seconds = time.monotonic() - started
            if not done and seconds <= step.limit_s:
                continue
            if not done:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                result = "124 (timed out)"
            else:
                result = str(os.waitstatus_to_exitcode(status))
            with contextlib.suppress(ProcessLookupError):  # what the step left behind
                os.killpg(pid, signal.SIGKILL)
            results[step.name] = f"{result} in {seconds:.1f} s"
            (out / f"{step.name}.result").write_text(results[step.name] + "\n")
            print(f"{step.name}: rc={results[step.name]}", flush=True)
            del running[pid]
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("queue", type=Path, help="the steps, as gpu_check.sh --dry-run writes them")
    parser.add_argument("--python", required=True, help="the word that names this interpreter in them")
    parser.add_argument("--out", type=Path, required=True, help="where the logs and results go")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="children at once")
    args = parser.parse_args(argv)
    started = time.monotonic()
    steps = read_queue(args.queue)
    for name in SHARED:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    results = run_all(steps, args.python, args.out, args.jobs)
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    print(f"dry run: {len(steps)} steps in {time.monotonic() - started:.1f} s wall, {cpu:.1f} s CPU")
    return int(any(not result.startswith("0 ") for result in results.values()))


if __name__ == "__main__":
    sys.exit(main())

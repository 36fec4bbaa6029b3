"""The package as a user installs it: a wheel built from this checkout goes into a fresh venv, and
``rotmem demo --data synthetic`` runs from a directory outside the checkout.

Nothing is downloaded: the wheel is built against the torch installed here (``pip wheel
--no-build-isolation --no-deps``, reusing the extension's compiled objects in ``build/`` when they are
current), installed with ``--no-deps --no-index``, and the fresh venv sees this environment's
packages (torch, Lightning, sentence-transformers, ...) through a ``.pth`` line, which adds them to
``sys.path`` without running their ``.pth`` files, so the checkout's editable install stays invisible.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def run(*command: str | Path, cwd: Path, env: dict | None = None, timeout: int = 600) -> str:
    done = subprocess.run(
        [str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, (
        f"{command}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-q",
        "--no-build-isolation",
        "--no-deps",
        "-w",
        dist,
        ROOT,
        cwd=ROOT,
    )
    (path,) = dist.glob("rotmem-*.whl")
    return path


def test_the_wheel_holds_the_package_its_configs_and_the_extension(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "rotmem/configs/synthetic.yaml" in names and "rotmem/py.typed" in names
    assert (
        any(n.startswith("rotmem/_C.") and n.endswith(".so") for n in names)
        or os.environ.get("ROTMEM_SKIP_NATIVE") == "1"
    )
    assert any(n.startswith("lightning_modules/") for n in names)
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "License-Expression: MIT" in text
    assert "Requires-Dist: torch>=2.11" in text and "Provides-Extra: train" in text
    requires = [line for line in text.splitlines() if line.startswith("Requires-Dist:")]
    base = [line for line in requires if "extra ==" not in line]
    assert sorted(base) == ["Requires-Dist: numpy>=1.26", "Requires-Dist: torch>=2.11"]  # kernels only


def test_the_demo_runs_from_the_installed_wheel_outside_the_checkout(wheel, tmp_path):
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    site = Path(
        run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp_path).strip()
    )
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # torch & co., no download
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "XDG_CACHE_HOME", "ROTMEM_DATA_DIR")
    }  # a checkout on PYTHONPATH would look installed already (its rotmem.egg-info) and be skipped
    run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        python,
        "install",
        "-q",
        "--no-deps",
        "--no-index",
        wheel,
        cwd=tmp_path,
        env=env,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env["HOME"] = str(tmp_path / "home")  # the demo pretrains its gate into ~/.cache/rotmem
    code = "import rotmem, rotmem.configs as c; print(rotmem.__file__, c.resolve('synthetic'))"
    where = run(python, "-c", code, cwd=elsewhere, env=env)
    assert str(ROOT) not in where and str(site) in where, where
    demo = ["demo", "--data", "synthetic", "--epochs", "1", "--out", tmp_path / "runs"]
    out = run(venv / "bin" / "rotmem", *demo, cwd=elsewhere, env=env)
    assert "test (time-aware filter): MRR" in out and "lives in, ?)" in out, out[-2000:]


def test_the_sdist_carries_the_native_sources(tmp_path):
    """MANIFEST.in: an sdist must rebuild the extension, so it holds every csrc file, headers too."""
    run(
        sys.executable,
        "setup.py",
        "-q",
        "sdist",
        "-d",
        tmp_path,
        cwd=ROOT,
        env={**os.environ, "ROTMEM_SKIP_NATIVE": "1"},
    )
    (sdist,) = tmp_path.glob("rotmem-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    wanted = {str(p.relative_to(ROOT)) for p in (ROOT / "csrc").rglob("*") if p.is_file()}
    assert wanted <= names, sorted(wanted - names)
    assert {
        "LICENSE",
        "CHANGELOG.md",
        "setup.py",
        "rotmem/configs/synthetic.yaml",
        "rotmem/py.typed",
    } <= names

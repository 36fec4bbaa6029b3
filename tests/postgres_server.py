"""A real Postgres server for the memory tests: ``$ROTMEM_TEST_POSTGRES_DSN`` when CI gives one,
else one started here from Debian's binaries (``/usr/lib/postgresql/*/bin``) in a temporary
directory, listening on a unix socket only, stopped when the test session ends. ``initdb`` refuses
root, so as root it runs as the ``postgres`` user (created by Debian's package).

Without either, the tests that need it skip with the reason, or fail under
``ROTMEM_REQUIRE_POSTGRES=1`` (``.ci/run``).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

DSN_VARIABLE = "ROTMEM_TEST_POSTGRES_DSN"
REQUIRE_VARIABLE = "ROTMEM_REQUIRE_POSTGRES"


def postgres_bin() -> Path | None:
    """The newest ``/usr/lib/postgresql/N/bin`` holding ``initdb`` and ``pg_ctl``, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3]))
    return Path(found[-1]).parent if found else None


def _unavailable(reason: str) -> None:
    if os.environ.get(REQUIRE_VARIABLE) == "1":
        pytest.fail(f"{REQUIRE_VARIABLE}=1 but no Postgres server: {reason}")
    pytest.skip(reason)


def _as_server_user(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def start_server(folder: Path, binaries: Path, fsync: bool = False) -> str:
    """initdb (unless ``folder`` already holds a server's data) + pg_ctl start in ``folder``; returns
    the DSN (unix socket, trust authentication). ``fsync=False`` (tests: nothing here kills the
    server) trades durability for speed."""
    data, socket_dir = folder / "data", folder / "socket"
    if not data.exists():
        socket_dir.mkdir()
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            for path in (folder, socket_dir):
                os.chown(path, user.pw_uid, user.pw_gid)
        subprocess.run(
            _as_server_user(
                [str(binaries / "initdb"), "-D", str(data), "-A", "trust", "-U", "rotmem", "--no-sync"]
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )
    options = (
        f"-k {socket_dir} -c listen_addresses='' -c fsync={'on' if fsync else 'off'} -c max_connections=200"
    )
    subprocess.run(
        _as_server_user(
            [
                str(binaries / "pg_ctl"),
                "-D",
                str(data),
                "-o",
                options,
                "-l",
                str(folder / "log"),
                "-w",
                "start",
            ]
        ),
        check=True,
        capture_output=True,
        timeout=120,
    )
    return f"postgresql://rotmem@/postgres?host={socket_dir}"


def stop_server(folder: Path, binaries: Path) -> None:
    subprocess.run(
        _as_server_user([str(binaries / "pg_ctl"), "-D", str(folder / "data"), "-m", "immediate", "stop"]),
        capture_output=True,
        timeout=60,
    )


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """The DSN of a real Postgres server (module docs)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable('psycopg is not installed: pip install "rotmem[server]"')
    given = os.environ.get(DSN_VARIABLE)
    if given:
        yield given
        return
    binaries = postgres_bin()
    if binaries is None:
        _unavailable("no Postgres binaries in /usr/lib/postgresql/*/bin (apt-get install postgresql)")
    if os.geteuid() == 0 and not shutil.which("runuser"):
        _unavailable("running as root without runuser to start Postgres as the postgres user")
    folder = Path(tempfile.mkdtemp(prefix="rotmem-pg-"))
    os.chmod(folder, 0o755)
    try:
        dsn = start_server(folder, binaries)
    except (subprocess.CalledProcessError, KeyError) as error:
        shutil.rmtree(folder, ignore_errors=True)
        detail = getattr(error, "stderr", b"") or b""
        _unavailable(f"could not start Postgres: {error} {detail.decode(errors='replace')[-300:]}")
    try:
        yield dsn
    finally:
        stop_server(folder, binaries)
        shutil.rmtree(folder, ignore_errors=True)


def new_namespace() -> str:
    """A namespace no other test uses."""
    return f"t{uuid.uuid4().hex[:16]}"

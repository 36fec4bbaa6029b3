#!/usr/bin/env bash
# CI: Debian's Postgres server binaries for the memory tests (tests/postgres_server.py starts and
# stops a throwaway server from them as the postgres user). Installs them when missing; pgvector is
# not used (measured against the in-memory index: see docs/memory.md).
set -euo pipefail
if ! compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" > /dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq postgresql > /dev/null
fi
ls -d /usr/lib/postgresql/*/bin > /dev/null

#!/usr/bin/env bash
# Start a throw-away PostgreSQL server on 127.0.0.1 for the Optuna RDB-storage tests and
# print the storage URL. Installs Debian's postgresql if missing (root). Idempotent: a server
# already running in the data dir is reused.
#   eval "$(scripts/start_postgres.sh)"   ->  exports GRPO_RESEARCH_PG_URL
set -euo pipefail
PORT=${GRPO_PG_PORT:-54329}
DATA=${GRPO_PG_DATA:-/tmp/grpo-research-pg}
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends postgresql >&2
fi
BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
id postgres >/dev/null 2>&1 || useradd --system --home "$DATA" postgres
as_pg() { if [ "$(id -un)" = postgres ]; then "$@"; else su postgres -s /bin/sh -c "$(printf '%q ' "$@")"; fi; }
if [ ! -f "$DATA/PG_VERSION" ]; then
  mkdir -p "$DATA" && chown postgres "$DATA"
  as_pg "$BIN/initdb" -D "$DATA" -A trust -U postgres >/dev/null
fi
if ! as_pg "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
  as_pg "$BIN/pg_ctl" -D "$DATA" -l "$DATA/server.log" -w \
    -o "-h 127.0.0.1 -p $PORT -k $DATA" start >/dev/null
fi
as_pg "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='optuna'" | grep -q 1 \
  || as_pg "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U postgres optuna
echo "export GRPO_RESEARCH_PG_URL=postgresql+psycopg2://postgres@127.0.0.1:$PORT/optuna"

# A private, throwaway PostgreSQL cluster for the test suite: initdb in a temporary
# directory, a free port on 127.0.0.1, trust auth, stopped and removed when the
# calling script exits. Sourced by ./run-tests and .ci/run:
#
#   source scripts/throwaway-postgres.sh
#   start_throwaway_postgres     # sets and exports DATABASE_URL
#
# Postgres refuses to run as root: as root, the cluster runs as the `postgres`
# user (runuser), which Debian's postgresql packages create.
# The binaries: IDEMD_PG_BIN, else the newest /usr/lib/postgresql/<version>/bin
# (Debian's layout), else initdb and pg_ctl on PATH.

throwaway_pg_bin() {
  if [ -n "${IDEMD_PG_BIN:-}" ]; then
    [ -x "$IDEMD_PG_BIN/initdb" ] || return 1
    echo "$IDEMD_PG_BIN"
    return
  fi
  local newest
  newest=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [ -n "$newest" ] && [ -x "$newest/initdb" ]; then
    echo "$newest"
    return
  fi
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(command -v initdb)"
    return
  fi
  return 1
}

throwaway_pg_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Runs a Postgres binary as the cluster's owner.
throwaway_pg_run() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

stop_throwaway_postgres() {
  if [ -n "${THROWAWAY_PG_DIR:-}" ] && [ -d "$THROWAWAY_PG_DIR" ]; then
    throwaway_pg_run "$THROWAWAY_PG_BIN/pg_ctl" -D "$THROWAWAY_PG_DIR/data" -m immediate \
      -w stop >/dev/null 2>&1 || true
    rm -rf "$THROWAWAY_PG_DIR"
  fi
  THROWAWAY_PG_DIR=
}

start_throwaway_postgres() {
  if ! THROWAWAY_PG_BIN=$(throwaway_pg_bin); then
    echo "PostgreSQL's server binaries are not installed: run 'apt-get install postgresql' (Debian/Ubuntu), or set DATABASE_URL to a server of yours." >&2
    return 1
  fi
  if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    echo "running as root without a 'postgres' user to run PostgreSQL as: create one, or set DATABASE_URL" >&2
    return 1
  fi
  THROWAWAY_PG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/idemd-pg.XXXXXX")
  trap stop_throwaway_postgres EXIT
  chmod 755 "$THROWAWAY_PG_DIR"
  [ "$(id -u)" = 0 ] && chown postgres "$THROWAWAY_PG_DIR"
  local port
  port=$(throwaway_pg_free_port)
  throwaway_pg_run "$THROWAWAY_PG_BIN/initdb" -A trust -U postgres -E UTF8 --no-locale \
    -D "$THROWAWAY_PG_DIR/data" >"$THROWAWAY_PG_DIR/initdb.log" 2>&1 || {
    cat "$THROWAWAY_PG_DIR/initdb.log" >&2
    return 1
  }
  # The unix socket lives in the cluster's own directory, so nothing under
  # /var/run is needed. max_connections: many tests each open a pool.
  throwaway_pg_run "$THROWAWAY_PG_BIN/pg_ctl" -D "$THROWAWAY_PG_DIR/data" \
    -l "$THROWAWAY_PG_DIR/postgres.log" -w -t 60 \
    -o "-p $port -k $THROWAWAY_PG_DIR -c listen_addresses=127.0.0.1 -c max_connections=300" \
    start >/dev/null || {
    cat "$THROWAWAY_PG_DIR/postgres.log" >&2
    return 1
  }
  export DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres"
  echo "throwaway postgres: $DATABASE_URL (data in $THROWAWAY_PG_DIR, removed at exit)"
}

#!/usr/bin/env bash
# Installs Debian's PostgreSQL package (server binaries used by the tests'
# PostgreSQL harness, testsuite/postgres.go) unless a server is already
# present, and PgBouncer (testsuite/pgbouncer.go) unless it is. The package's own cluster is not needed: the tests initdb their
# own. Idempotent; safe to run often.
#
# Environment:
#   BATON_PG_BIN  directory holding initdb and postgres to check (default:
#                 the newest /usr/lib/postgresql/*/bin)
set -euo pipefail

pg_bin() {
  if [[ -n "${BATON_PG_BIN:-}" ]]; then
    [[ -x "${BATON_PG_BIN}/postgres" && -x "${BATON_PG_BIN}/initdb" ]] && echo "${BATON_PG_BIN}"
    return
  fi
  local dir
  dir="$(compgen -G '/usr/lib/postgresql/*/bin/postgres' | sort -V | tail -n 1)" || return 1
  [[ -n "${dir}" && -x "${dir%/postgres}/initdb" ]] && echo "${dir%/postgres}"
}

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# PgBouncer: the tests run the store through it in transaction mode.
if ! command -v pgbouncer >/dev/null 2>&1 && [[ ! -x /usr/sbin/pgbouncer ]]; then
  apt_install pgbouncer pgbouncer
fi

if bin="$(pg_bin)"; then
  echo "postgresql: already installed (${bin})"
  exit 0
fi

apt_install postgresql postgresql

if ! bin="$(pg_bin)"; then
  echo "postgresql: installation finished but initdb and postgres are still missing" >&2
  exit 1
fi
echo "postgresql: installed (${bin})"

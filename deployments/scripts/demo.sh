#!/usr/bin/env bash
# Baton's demo: the local stack, a three-instance cluster (2 runners + 1
# backup), the demo site served from the project itself, and a crawl of it
# with link following and field extraction. The workers and the CLI
# authenticate to ZooKeeper with the stack's credentials (.stack/zk-auth).
#
# Usage: demo.sh up|down
#
# Environment (all optional):
#   BATON_DEMO_PORT     port of the demo site      (default 8000)
#   BATON_DEMO_KILL     "1": SIGKILL runner 2 mid-crawl to show the fail-over
#   BATON_STACK_DIR     state/log dir              (default <repo>/.stack)
#   BATON_ZK_PORT, BATON_TEMPORAL_PORT, BATON_UI_PORT as for stack.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STACK_DIR="${BATON_STACK_DIR:-${ROOT}/.stack}"
DEMO_DIR="${STACK_DIR}/demo"
DATA_DIR="${DEMO_DIR}/data"
BIN="${ROOT}/bin"
SITE_PORT="${BATON_DEMO_PORT:-8000}"
ZK="127.0.0.1:${BATON_ZK_PORT:-2181}"
TEMPORAL="127.0.0.1:${BATON_TEMPORAL_PORT:-7233}"
UI="http://127.0.0.1:${BATON_UI_PORT:-8233}"
TIMEOUT=120
# The local stack's ZooKeeper credentials (stack.sh makes them): the
# workers and the CLI authenticate with them and Baton's znodes get a
# digest ACL. A file, never a command-line value.
ZK_AUTH_FILE="${STACK_DIR}/zk-auth"
unset BATON_ZK_AUTH

log() { echo "demo: $*"; }
die() { echo "demo: error: $*" >&2; exit 1; }

baton() { "${BIN}/baton" --zk-hosts "${ZK}" --zk-auth-file "${ZK_AUTH_FILE}" --temporal-address "${TEMPORAL}" --ui-url "${UI}" --data-dir "${DATA_DIR}" "$@"; }

start_bg() { # name pidfile logfile cmd...
  local name=$1 pid=$2 logf=$3; shift 3
  if [[ -f "${pid}" ]] && kill -0 "$(cat "${pid}")" 2>/dev/null; then
    log "${name} already running (pid $(cat "${pid}"))"; return
  fi
  setsid "$@" >>"${logf}" 2>&1 < /dev/null &
  echo $! > "${pid}"
  log "started ${name} (pid $!, log ${logf})"
}

stop_pid() {
  local pid=$1
  [[ -f "${pid}" ]] || return 0
  local p; p=$(cat "${pid}")
  if kill -0 "${p}" 2>/dev/null; then
    kill -TERM "${p}" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "${p}" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "${p}" 2>/dev/null || true
  fi
  rm -f "${pid}"
}

wait_for() { # description command...
  local what=$1; shift
  local deadline=$((SECONDS + TIMEOUT))
  until "$@" >/dev/null 2>&1; do
    (( SECONDS < deadline )) || die "timed out after ${TIMEOUT}s waiting for ${what}"
    sleep 0.2
  done
}

# elected: two runners and one backup, whoever they are (a re-run of the demo
# finds the roles the previous run left).
cluster_elected() {
  local out; out=$(baton cluster) || return 1
  [[ $(grep -cE '^sc-crawler_[0-9]+ +runner ' <<<"${out}") -eq 2 && \
     $(grep -cE '^sc-crawler_[0-9]+ +backup-runner ' <<<"${out}") -eq 1 ]]
}
site_up() { exec 3<>"/dev/tcp/127.0.0.1/${SITE_PORT}"; }

up() {
  mkdir -p "${DEMO_DIR}" "${DATA_DIR}"
  make -C "${ROOT}" --no-print-directory build
  make -C "${ROOT}" --no-print-directory stack-up
  start_bg "demo site on :${SITE_PORT}" "${DEMO_DIR}/site.pid" "${DEMO_DIR}/site.log" \
    "${BIN}/baton" demo-site --addr "127.0.0.1:${SITE_PORT}" --latency 30ms
  wait_for "the demo site" site_up
  for i in 1 2 3; do
    start_bg "worker sc-crawler_${i}" "${DEMO_DIR}/worker-${i}.pid" "${DEMO_DIR}/worker-${i}.log" \
      "${BIN}/baton-worker" --name "sc-crawler_${i}" --runner 2 --backup 1 --zk-hosts "${ZK}" \
      --zk-auth-file "${ZK_AUTH_FILE}" --temporal-address "${TEMPORAL}" --data-dir "${DATA_DIR}"
  done
  wait_for "the election (2 runners, 1 backup)" cluster_elected
  baton cluster
  local job; job="demo-$(date -u +%Y%m%d-%H%M%S)"
  echo
  log "crawling http://127.0.0.1:${SITE_PORT}/ as job ${job}"
  if [[ "${BATON_DEMO_KILL:-}" == "1" ]]; then
    # Kill runner 2 once a third of the site is crawled.
    ( recorded() { baton jobs 2>/dev/null | awk -v j="${job}" '$1 == j {print $4}'; }
      deadline=$((SECONDS + TIMEOUT))
      until (( $(recorded || echo 0) >= 100 )) 2>/dev/null; do
        (( SECONDS < deadline )) || exit 0
        sleep 0.1
      done
      victim=$(baton cluster | awk '$2 == "runner" && $5 == "processing" {print $1; exit}')
      [[ -n "${victim}" ]] || victim=$(baton cluster | awk '$2 == "runner" {print $1; exit}')
      echo; log "SIGKILL runner ${victim} mid-crawl; the backup takes over its batch"
      kill -KILL "$(cat "${DEMO_DIR}/worker-${victim##*_}.pid")" ) &
  fi
  baton crawl "http://127.0.0.1:${SITE_PORT}/" --id "${job}" --follow --depth 8 --max-pages 2000 \
    --select heading=h1.title --select price=.price --timeout 5s --wait
  echo
  baton cluster
  cat <<MSG

demo: done.
  results   bin/baton results ${job} --data-dir ${DATA_DIR} [--format csv]   (SQLite store ${DATA_DIR}/baton.db)
  the CLI   export BATON_ZK_AUTH_FILE=${ZK_AUTH_FILE}   (ZooKeeper's credentials) for bin/baton cluster, task, ...
  Web UI    ${UI}/namespaces/default/workflows   (filter: BatonJob = '${job}', or BatonCluster = 'sc-crawler-cluster')
  the job   ${UI}/namespaces/default/workflows/baton-job%2Fsc-crawler-cluster%2F${job}
  logs      ${DEMO_DIR}/worker-*.log
  stop it   make demo-down
MSG
}

down() {
  for i in 1 2 3; do stop_pid "${DEMO_DIR}/worker-${i}.pid"; done
  stop_pid "${DEMO_DIR}/site.pid"
  make -C "${ROOT}" --no-print-directory stack-down
  log "stopped (data kept in ${DEMO_DIR})"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac

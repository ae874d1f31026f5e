#!/usr/bin/env bash
# Local Baton stack: a standalone ZooKeeper and a Temporal dev server, both on
# loopback, with state, pid files and logs under .stack/.
#
# ZooKeeper runs with digest authentication enforced (zoo.cfg): a session
# that does not authenticate can do nothing. The credentials, user:password,
# are made at the first start in .stack/zk-auth (mode 0600); give them to
# Baton's workers and CLI with --zk-auth-file .stack/zk-auth, or
#   export BATON_ZK_AUTH_FILE=$PWD/.stack/zk-auth
# and Baton's znodes get a digest ACL for that user. A ZooKeeper data
# directory from before the credentials (an open-ACL root Baton would
# refuse) is moved aside when they are made.
#
# Usage: stack.sh up|down|status
#
# Environment (all optional):
#   BATON_ZK_PORT           ZooKeeper client port           (default 2181)
#   BATON_TEMPORAL_PORT     Temporal frontend gRPC port     (default 7233)
#   BATON_UI_PORT           Temporal Web UI port            (default 8233)
#   BATON_STACK_DIR         state/log dir                   (default <repo>/.stack)
#   BATON_ZK_HOME           ZooKeeper install dir           (default /usr/share/zookeeper)
#   BATON_TEMPORAL_BIN      temporal CLI binary             (default .stack/bin/temporal, then PATH)
#   BATON_STACK_TIMEOUT     seconds to wait for readiness   (default 120)
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STACK_DIR="${BATON_STACK_DIR:-${ROOT}/.stack}"
ZK_PORT="${BATON_ZK_PORT:-2181}"
TEMPORAL_PORT="${BATON_TEMPORAL_PORT:-7233}"
UI_PORT="${BATON_UI_PORT:-8233}"
ZK_HOME="${BATON_ZK_HOME:-/usr/share/zookeeper}"
TIMEOUT="${BATON_STACK_TIMEOUT:-120}"
HOST=127.0.0.1
NAMESPACE=default
SEARCH_ATTRIBUTES=(BatonCluster=Keyword BatonCrawler=Keyword BatonRole=Keyword BatonJob=Keyword)

ZK_DIR="${STACK_DIR}/zookeeper"
ZK_CONF_DIR="${ZK_DIR}/conf"
ZK_DATA_DIR="${ZK_DIR}/data"
ZK_PID="${ZK_DIR}/zookeeper.pid"
ZK_LOG="${ZK_DIR}/zookeeper.log"
ZK_TEMPLATE="${ROOT}/deployments/zookeeper/zoo.cfg"
ZK_AUTH="${STACK_DIR}/zk-auth"
ZK_USER=baton

TEMPORAL_DIR="${STACK_DIR}/temporal"
TEMPORAL_PID="${TEMPORAL_DIR}/temporal.pid"
TEMPORAL_LOG="${TEMPORAL_DIR}/temporal.log"
TEMPORAL_DB="${TEMPORAL_DIR}/temporal.db"

log() { echo "stack: $*"; }
die() { echo "stack: error: $*" >&2; exit 1; }

# ---------------------------------------------------------------- helpers

temporal_bin() {
  if [[ -n "${BATON_TEMPORAL_BIN:-}" ]]; then
    echo "${BATON_TEMPORAL_BIN}"
  elif [[ -x "${STACK_DIR}/bin/temporal" ]]; then
    echo "${STACK_DIR}/bin/temporal"
  elif command -v temporal >/dev/null 2>&1; then
    command -v temporal
  else
    return 1
  fi
}





# zk_4lw CMD: sends a ZooKeeper four-letter-word command and prints the reply.
zk_4lw() {
  timeout 3 bash -c "exec 3<>/dev/tcp/${HOST}/${ZK_PORT}; printf '%s' '$1' >&3; cat <&3" 2>/dev/null
}

zk_ready() {
  [[ "$(zk_4lw ruok || true)" == "imok" ]]
}

temporal_ready() {
  local bin
  bin="$(temporal_bin)" || return 1
  "${bin}" operator cluster health --address "${HOST}:${TEMPORAL_PORT}" \
    --command-timeout 3s >/dev/null 2>&1
}

# wait_until NAME PIDFILE LOGFILE CHECK: polls CHECK until it succeeds, the
# process dies or the deadline passes.
wait_until() {
  local name="$1" pidfile="$2" logfile="$3" check="$4"
  local deadline=$((SECONDS + TIMEOUT))
  until "${check}"; do
    if ! pid_alive "${pidfile}"; then
      echo "stack: ${name} exited during startup; last log lines (${logfile}):" >&2
      tail -n 40 "${logfile}" >&2 || true
      return 1
    fi
    if ((SECONDS >= deadline)); then
      echo "stack: ${name} not ready after ${TIMEOUT}s; last log lines (${logfile}):" >&2
      tail -n 40 "${logfile}" >&2 || true
      return 1
    fi
    sleep 0.5
  done
}

# recorded_port PIDFILE: prints the port(s) the process of PIDFILE was started
# with (stored next to the pid file by spawn).
recorded_port() {
  cat "${1%.pid}.port" 2>/dev/null || true
}

# check_running_port NAME PIDFILE PORTS: fails if the running process was
# started on other ports than the ones requested now.
check_running_port() {
  local name="$1" pidfile="$2" want="$3" have
  have="$(recorded_port "${pidfile}")"
  if [[ -n "${have}" && "${have}" != "${want}" ]]; then
    die "${name}: already running on port ${have}, not ${want}; run '$0 down' first"
  fi
}

# spawn PIDFILE PORTS LOGFILE CMD...: starts CMD detached in its own session
# and records its pid and ports (a space-separated list).
spawn() {
  local pidfile="$1" port="$2" logfile="$3"
  shift 3
  echo "${port}" >"${pidfile%.pid}.port"
  # In a non-interactive shell a background job is not a process-group
  # leader, so setsid does not fork and $! is the server's pid (and pgid).
  nohup setsid "$@" >>"${logfile}" 2>&1 </dev/null &
  echo $! >"${pidfile}"
}

# stop_pid NAME PIDFILE: SIGTERM the process group, SIGKILL after 30s.
stop_pid() {
  local name="$1" pidfile="$2" pid
  if ! pid_alive "${pidfile}"; then
    log "${name}: not running"
    rm -f "${pidfile}" "${pidfile%.pid}.port"
    return 0
  fi
  pid="$(cat "${pidfile}")"
  log "${name}: stopping (pid ${pid})"
  kill -TERM -- "-${pid}" 2>/dev/null || kill -TERM "${pid}" 2>/dev/null || true
  local deadline=$((SECONDS + 30))
  while kill -0 "${pid}" 2>/dev/null; do
    if ((SECONDS >= deadline)); then
      log "${name}: still running after 30s, sending SIGKILL"
      kill -KILL -- "-${pid}" 2>/dev/null || kill -KILL "${pid}" 2>/dev/null || true
      break
    fi
    sleep 0.2
  done
  rm -f "${pidfile}" "${pidfile%.pid}.port"
  log "${name}: stopped"
}

# ---------------------------------------------------------------- zookeeper

# zk_credentials: makes ${ZK_AUTH} (user:password, 0600) unless it exists.
# Data of a server run before it (znodes made without credentials, with an
# open ACL, or with other credentials) is moved aside: Baton refuses an open
# root once it authenticates, and others' ACLs refuse it.
zk_credentials() {
  if [[ -f "${ZK_AUTH}" ]]; then
    [[ -s "${ZK_AUTH}" ]] || die "${ZK_AUTH} is empty; remove it (and ${ZK_DATA_DIR}) to make new credentials"
    chmod 600 "${ZK_AUTH}"
    return 0
  fi
  if [[ -d "${ZK_DATA_DIR}/version-2" ]]; then
    local aside
    aside="${ZK_DIR}/data.before-auth-$(date -u +%Y%m%dT%H%M%SZ)"
    mv "${ZK_DATA_DIR}" "${aside}"
    log "zookeeper: data from before these credentials (its znodes' ACLs are open, or for others) moved to ${aside}"
  fi
  local password
  password="$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')"
  [[ ${#password} -eq 48 ]] || die "could not read 24 random bytes from /dev/urandom"
  (umask 077 && printf '%s:%s\n' "${ZK_USER}" "${password}" >"${ZK_AUTH}")
  log "zookeeper: digest credentials made in ${ZK_AUTH} (mode 0600, user ${ZK_USER})"
}

zk_up() {
  if pid_alive "${ZK_PID}"; then
    check_running_port zookeeper "${ZK_PID}" "${ZK_PORT}"
    log "zookeeper: already running (pid $(cat "${ZK_PID}"))"
  else
    local java cp
    java="$(java_bin)" || die "java not found; run 'make deps'"
    cp="$(zk_classpath "${ZK_CONF_DIR}")" || die "ZooKeeper not found under ${ZK_HOME} or /usr/share/java; run 'make deps'"
    if port_open "${ZK_PORT}"; then
      die "zookeeper: ${HOST}:${ZK_PORT} is already in use (set BATON_ZK_PORT)"
    fi
    [[ -f "${ZK_TEMPLATE}" ]] || die "missing ${ZK_TEMPLATE}"
    grep -q '^enforce.auth.enabled=true' "${ZK_TEMPLATE}" || die "${ZK_TEMPLATE} does not enforce authentication"
    zk_credentials
    mkdir -p "${ZK_CONF_DIR}" "${ZK_DATA_DIR}"
    sed -e "s|^dataDir=.*|dataDir=${ZK_DATA_DIR}|" \
      -e "s|^clientPort=.*|clientPort=${ZK_PORT}|" \
      "${ZK_TEMPLATE}" >"${ZK_CONF_DIR}/zoo.cfg"
    log "zookeeper: starting on ${HOST}:${ZK_PORT} (log ${ZK_LOG})"
    spawn "${ZK_PID}" "${ZK_PORT}" "${ZK_LOG}" \
      "${java}" -Xms64m -Xmx1g -XX:+UseSerialGC -Djava.awt.headless=true \
      "-Dzookeeper.log.dir=${ZK_DIR}" \
      -Dorg.slf4j.simpleLogger.defaultLogLevel=info \
      -Dorg.slf4j.simpleLogger.showDateTime=true \
      -cp "${cp}" org.apache.zookeeper.server.quorum.QuorumPeerMain \
      "${ZK_CONF_DIR}/zoo.cfg"
  fi
  wait_until zookeeper "${ZK_PID}" "${ZK_LOG}" zk_ready
  log "zookeeper: ready (ruok -> imok) at ${HOST}:${ZK_PORT}, digest authentication enforced"
  log "zookeeper: Baton's credentials: export BATON_ZK_AUTH_FILE=${ZK_AUTH}"
}

# ---------------------------------------------------------------- temporal

temporal_up() {
  local bin
  bin="$(temporal_bin)" || die "temporal CLI not found; run 'make deps'"
  [[ -x "${bin}" ]] || die "temporal CLI ${bin} is not executable; run 'make deps'"
  if pid_alive "${TEMPORAL_PID}"; then
    check_running_port temporal "${TEMPORAL_PID}" "${TEMPORAL_PORT} ${UI_PORT}"
    log "temporal: already running (pid $(cat "${TEMPORAL_PID}"))"
  else
    local p
    for p in "${TEMPORAL_PORT}" "${UI_PORT}"; do
      if port_open "${p}"; then
        die "temporal: ${HOST}:${p} is already in use (set BATON_TEMPORAL_PORT / BATON_UI_PORT)"
      fi
    done
    mkdir -p "${TEMPORAL_DIR}"
    local args=(server start-dev
      --ip "${HOST}" --port "${TEMPORAL_PORT}" --ui-port "${UI_PORT}"
      --db-filename "${TEMPORAL_DB}" --namespace "${NAMESPACE}" --log-level warn)
    local sa
    for sa in "${SEARCH_ATTRIBUTES[@]}"; do
      args+=(--search-attribute "${sa}")
    done
    # One partition per task queue: on a single dev server, the default four
    # partitions add ~40 ms of forwarding to every task dispatch.
    # Eager activities: an activity a workflow task schedules on its own
    # task queue goes back to the worker in the task's reply, not through
    # matching (~40 ms less per hop, e.g. a job's first JobAssign).
    args+=(--dynamic-config-value matching.numTaskqueueReadPartitions=1
           --dynamic-config-value matching.numTaskqueueWritePartitions=1
           --dynamic-config-value system.enableActivityEagerExecution=true)
    # The transfer queue read up to 1000 times a second: the dev server has
    # one history shard, and at the default 20 reads a second every workflow
    # task waited 25 ms on average before a worker got it (a job's start, a
    # fail-over, every step); a cluster spreads its workflows over many
    # shards. (testsuite.TransferPollRPS, the same value for the tests.)
    args+=(--dynamic-config-value history.transferProcessorMaxPollRPS=1000)
    log "temporal: starting on ${HOST}:${TEMPORAL_PORT}, UI http://${HOST}:${UI_PORT} (log ${TEMPORAL_LOG})"
    spawn "${TEMPORAL_PID}" "${TEMPORAL_PORT} ${UI_PORT}" "${TEMPORAL_LOG}" "${bin}" "${args[@]}"
  fi
  wait_until temporal "${TEMPORAL_PID}" "${TEMPORAL_LOG}" temporal_ready
  log "temporal: ready (cluster health SERVING) at ${HOST}:${TEMPORAL_PORT}"
}

# ---------------------------------------------------------------- commands

cmd_up() {
  mkdir -p "${STACK_DIR}"
  zk_up
  temporal_up
  cmd_status
}

cmd_down() {
  stop_pid temporal "${TEMPORAL_PID}"
  stop_pid zookeeper "${ZK_PID}"
}

cmd_status() {
  local rc=0 state
  # Report on the ports the running processes were started with.
  if pid_alive "${ZK_PID}" && [[ -n "$(recorded_port "${ZK_PID}")" ]]; then
    ZK_PORT="$(recorded_port "${ZK_PID}")"
  fi
  if pid_alive "${TEMPORAL_PID}" && [[ -n "$(recorded_port "${TEMPORAL_PID}")" ]]; then
    read -r TEMPORAL_PORT UI_PORT <<<"$(recorded_port "${TEMPORAL_PID}")"
  fi
  if pid_alive "${ZK_PID}"; then state="running (pid $(cat "${ZK_PID}"))"; else state="not running"; fi
  if zk_ready; then
    log "zookeeper: ${state}, healthy at ${HOST}:${ZK_PORT}; credentials ${ZK_AUTH}; log ${ZK_LOG}"
  else
    log "zookeeper: ${state}, NOT answering ruok at ${HOST}:${ZK_PORT}"
    rc=1
  fi
  if pid_alive "${TEMPORAL_PID}"; then state="running (pid $(cat "${TEMPORAL_PID}"))"; else state="not running"; fi
  if temporal_ready; then
    log "temporal:  ${state}, healthy at ${HOST}:${TEMPORAL_PORT}, UI http://${HOST}:${UI_PORT}; log ${TEMPORAL_LOG}"
  else
    log "temporal:  ${state}, NOT serving at ${HOST}:${TEMPORAL_PORT}"
    rc=1
  fi
  return "${rc}"
}

up_down_status "$@"

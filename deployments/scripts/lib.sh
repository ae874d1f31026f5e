# Shared helpers of Baton's scripts; source it, do not run it.

# apt_install LABEL PACKAGE...: install Debian packages with apt-get, as
# root or through sudo; messages are prefixed with LABEL.
apt_install() {
  local label=$1; shift
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "${label}: apt-get is not available: install $* by hand" >&2
    return 1
  fi
  local sudo=()
  if [[ "$(id -u)" -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      echo "${label}: need root (or sudo) to install packages with apt-get" >&2
      return 1
    fi
  fi
  echo "${label}: installing Debian package(s) $* with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update
  "${sudo[@]}" apt-get install -y --no-install-recommends "$@"
}

# java_bin: the Java runtime ZooKeeper runs on.
java_bin() {
  if [[ -n "${JAVA_HOME:-}" && -x "${JAVA_HOME}/bin/java" ]]; then
    echo "${JAVA_HOME}/bin/java"
  elif command -v java >/dev/null 2>&1; then
    command -v java
  else
    return 1
  fi
}

# zk_classpath CONF_DIR: the server classpath (the Debian layout, or an
# upstream tarball's $ZK_HOME/lib/*.jar), as the test harness does.
zk_classpath() {
  local cp="$1"
  if compgen -G "${ZK_HOME}/lib/*.jar" >/dev/null; then
    cp="${cp}:${ZK_HOME}/lib/*"
  elif [[ -f /usr/share/java/zookeeper.jar ]]; then
    cp="${cp}:/usr/share/java/zookeeper.jar"
    if [[ -f /usr/share/java/slf4j-simple.jar ]]; then
      cp="${cp}:/usr/share/java/slf4j-simple.jar"
    fi
  else
    return 1
  fi
  echo "${cp}"
}

# running PID: true if PID is a live process (not a zombie waiting to be
# reaped).
running() {
  kill -0 "$1" 2>/dev/null && [[ "$(ps -o stat= -p "$1" 2>/dev/null)" != Z* ]]
}

# pid_alive FILE: true if FILE names a running process.
pid_alive() {
  local pid
  [[ -f "$1" ]] || return 1
  pid="$(cat "$1")"
  [[ -n "${pid}" ]] && running "${pid}"
}

port_open() { # PORT on ${HOST}
  timeout 3 bash -c "exec 3<>/dev/tcp/${HOST}/$1" 2>/dev/null
}

# up_down_status "$@": run cmd_up, cmd_down or cmd_status, as the first
# argument names; anything else prints the usage and exits 2.
up_down_status() {
  case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  *)
    echo "usage: $0 up|down|status" >&2
    exit 2
    ;;
  esac
}

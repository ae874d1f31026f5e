#!/usr/bin/env bash
# Installs Debian's ZooKeeper package (and, through its dependencies, a Java
# runtime) unless both are already present. Idempotent; safe to run often.
#
# Environment:
#   BATON_ZK_HOME  ZooKeeper install dir to check (default /usr/share/zookeeper)
set -euo pipefail

ZK_HOME="${BATON_ZK_HOME:-/usr/share/zookeeper}"

have_java() {
  if [[ -n "${JAVA_HOME:-}" && -x "${JAVA_HOME}/bin/java" ]]; then
    return 0
  fi
  command -v java >/dev/null 2>&1
}

if [[ -x "${ZK_HOME}/bin/zkServer.sh" ]] && have_java; then
  echo "zookeeper: already installed (${ZK_HOME}, java: $(command -v java || echo "${JAVA_HOME}/bin/java"))"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "zookeeper: ${ZK_HOME}/bin/zkServer.sh or java missing and apt-get is not available;" >&2
  echo "zookeeper: install ZooKeeper 3.8 and a Java runtime manually (or set BATON_ZK_HOME)." >&2
  exit 1
fi

SUDO=()
if [[ "$(id -u)" -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  else
    echo "zookeeper: need root (or sudo) to install packages with apt-get" >&2
    exit 1
  fi
fi

echo "zookeeper: installing Debian package 'zookeeper' with apt-get"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update
"${SUDO[@]}" apt-get install -y --no-install-recommends zookeeper

if [[ ! -x "${ZK_HOME}/bin/zkServer.sh" ]] || ! have_java; then
  echo "zookeeper: installation finished but ${ZK_HOME}/bin/zkServer.sh or java is still missing" >&2
  exit 1
fi
echo "zookeeper: installed (${ZK_HOME})"

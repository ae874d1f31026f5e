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

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
apt_install zookeeper zookeeper

if [[ ! -x "${ZK_HOME}/bin/zkServer.sh" ]] || ! have_java; then
  echo "zookeeper: installation finished but ${ZK_HOME}/bin/zkServer.sh or java is still missing" >&2
  exit 1
fi
echo "zookeeper: installed (${ZK_HOME})"

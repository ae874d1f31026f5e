#!/usr/bin/env bash
# Install what BenchmarkRealSite crawls: nginx (nginx-light) serving a real
# documentation site no one here wrote, Debian's HTML manual of PostgreSQL 15
# (postgresql-doc-15: about 1,200 densely cross-linked pages). Idempotent;
# needs root (apt).
set -euo pipefail
need=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
[ -d /usr/share/doc/postgresql-doc-15/html ] || need+=(postgresql-doc-15)
if [ ${#need[@]} -gt 0 ]; then
  echo "real site: apt-get install ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null
  # The package starts a system nginx on port 80; the benchmark runs its own.
  systemctl disable --now nginx >/dev/null 2>&1 || service nginx stop >/dev/null 2>&1 || true
fi

#!/usr/bin/env bash
# Installs Debian's Chromium package (headless browser used by the Web UI
# test, testsuite/webui_test.go) unless a chromium binary is already present.
# Idempotent; safe to run often.
#
# Environment:
#   BATON_CHROMIUM  chromium binary to check (default: chromium on $PATH)
set -euo pipefail

have_chromium() {
  if [[ -n "${BATON_CHROMIUM:-}" ]]; then
    [[ -x "${BATON_CHROMIUM}" ]]
    return
  fi
  command -v chromium >/dev/null 2>&1
}

if have_chromium; then
  echo "chromium: already installed ($(command -v "${BATON_CHROMIUM:-chromium}"))"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "chromium: not found and apt-get is not available;" >&2
  echo "chromium: install Chromium manually (or set BATON_CHROMIUM to its binary)." >&2
  exit 1
fi

SUDO=()
if [[ "$(id -u)" -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  else
    echo "chromium: need root (or sudo) to install packages with apt-get" >&2
    exit 1
  fi
fi

echo "chromium: installing Debian package 'chromium' with apt-get"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update
"${SUDO[@]}" apt-get install -y --no-install-recommends chromium

if ! have_chromium; then
  echo "chromium: installation finished but chromium is still missing" >&2
  exit 1
fi
echo "chromium: installed ($(command -v "${BATON_CHROMIUM:-chromium}"))"

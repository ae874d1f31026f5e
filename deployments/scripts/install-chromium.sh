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

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
apt_install chromium chromium

if ! have_chromium; then
  echo "chromium: installation finished but chromium is still missing" >&2
  exit 1
fi
echo "chromium: installed ($(command -v "${BATON_CHROMIUM:-chromium}"))"

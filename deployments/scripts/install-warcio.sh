#!/usr/bin/env bash
# Installs warcio.js (Webrecorder's WARC reader, the parser of replayweb.page)
# from the npm registry into a project-local dir, unless it is already there,
# and links its CLI as <stack>/bin/warcio. The archive tests read Baton's WARC
# files with it. Node.js and npm come from Debian's packages if missing.
# Idempotent; safe to run often.
#
# Environment:
#   BATON_STACK_DIR       state dir (default <repo>/.stack)
#   BATON_WARCIO_VERSION  warcio version (default 2.4.11)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STACK_DIR="${BATON_STACK_DIR:-${ROOT}/.stack}"
VERSION="${BATON_WARCIO_VERSION:-2.4.11}"
PREFIX="${STACK_DIR}/warcio"
BIN="${STACK_DIR}/bin/warcio"
PKG="${PREFIX}/node_modules/warcio/package.json"

installed_version() {
  [[ -f "${PKG}" ]] && sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "${PKG}" | head -n1
}

if [[ "$(installed_version)" == "${VERSION}" && -x "${BIN}" ]]; then
  echo "warcio: already installed (${BIN}, ${VERSION})"
  exit 0
fi

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  # shellcheck source=lib.sh
  source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
  apt_install warcio nodejs npm
fi

mkdir -p "${PREFIX}" "${STACK_DIR}/bin"
echo "warcio: npm install warcio@${VERSION} into ${PREFIX}"
npm install --prefix "${PREFIX}" --no-audit --no-fund --omit=dev --no-save "warcio@${VERSION}" >/dev/null
ln -sf "${PREFIX}/node_modules/.bin/warcio" "${BIN}"

if [[ "$(installed_version)" != "${VERSION}" ]] || ! "${BIN}" --version >/dev/null 2>&1; then
  echo "warcio: installation finished but ${BIN} does not run" >&2
  exit 1
fi
echo "warcio: installed (${BIN}, $("${BIN}" --version))"

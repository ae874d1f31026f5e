#!/usr/bin/env bash
# Installs the Temporal CLI (which embeds the dev server used by the local stack
# and the integration tests) into a project-local bin dir, unless it is already
# there. Idempotent; safe to run often.
#
# Environment:
#   BATON_STACK_DIR         state dir (default <repo>/.stack)
#   BATON_TEMPORAL_VERSION  CLI module version (default v1.5.1)
#   BATON_TEMPORAL_BIN      if set and executable, nothing is installed
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STACK_DIR="${BATON_STACK_DIR:-${ROOT}/.stack}"
BIN_DIR="${STACK_DIR}/bin"
VERSION="${BATON_TEMPORAL_VERSION:-v1.5.1}"
MODULE="github.com/temporalio/cli/cmd/temporal"

if [[ -n "${BATON_TEMPORAL_BIN:-}" && -x "${BATON_TEMPORAL_BIN}" ]]; then
  echo "temporal: using BATON_TEMPORAL_BIN=${BATON_TEMPORAL_BIN}"
  exit 0
fi

if [[ -x "${BIN_DIR}/temporal" ]]; then
  echo "temporal: already installed (${BIN_DIR}/temporal)"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "temporal: the go toolchain is required to install ${MODULE}@${VERSION}" >&2
  exit 1
fi

mkdir -p "${BIN_DIR}"
echo "temporal: go install ${MODULE}@${VERSION} -> ${BIN_DIR} (first build takes a few minutes)"
# Run outside the repository so the main module's go.mod cannot interfere.
(cd "${STACK_DIR}" && GOBIN="${BIN_DIR}" GOFLAGS="" go install "${MODULE}@${VERSION}")

if [[ ! -x "${BIN_DIR}/temporal" ]]; then
  echo "temporal: go install finished but ${BIN_DIR}/temporal is missing" >&2
  exit 1
fi
echo "temporal: installed (${BIN_DIR}/temporal)"

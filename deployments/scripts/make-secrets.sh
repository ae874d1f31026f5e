#!/usr/bin/env bash
# Makes the secret files of a deployment, with random values, where the
# deployment reads them; an existing file is kept (rotate one by removing
# it, then change it in the servers too). Nothing is printed but the paths.
#
# Usage: make-secrets.sh compose|k8s
#
#   compose  deployments/compose/secrets/ (docker-compose.yml's `secrets:`):
#              zk-auth      ZooKeeper digest credentials baton:<random>
#              secrets-key  the group's key for crawl jobs' secrets (32 bytes, hex)
#              store-password  the job store's PostgreSQL password (baton-db's)
#            The directory is 0700 (other users of the host cannot read the
#            files); the files are 0644 because Compose bind-mounts them as
#            they are and the containers' users (10001) must read them.
#   k8s      deployments/k8s/secrets/ (kustomization.yaml's secretGenerator):
#              zk-auth, secrets-key, store-password (the job store's
#              PostgreSQL password), and the job store's TLS: ca.crt (a new
#              CA; its key ca.key stays here, never in the cluster),
#              baton-db.crt and baton-db.key (the server's certificate for
#              baton-db, baton-db.<ns>, baton-db.<ns>.svc and
#              baton-db.<ns>.svc.cluster.local). Directory 0700, files 0600.
#            BATON_K8S_NAMESPACE (default baton) is the namespace in the names.
#            To use your own CA (cert-manager, a company CA), put its files
#            there instead before running this.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

log() { echo "make-secrets: $*"; }
die() { echo "make-secrets: error: $*" >&2; exit 1; }

# random_hex N: N random bytes as 2N hex characters.
random_hex() {
  local h
  h="$(od -An -tx1 -N"$1" /dev/urandom | tr -d ' \n')"
  [[ ${#h} -eq $(($1 * 2)) ]] || die "could not read $1 random bytes from /dev/urandom"
  echo "${h}"
}

# put FILE MODE VALUE: writes VALUE to FILE with MODE unless FILE exists.
put() {
  local file=$1 mode=$2 value=$3
  if [[ -e "${file}" ]]; then
    log "kept ${file}"
    chmod "${mode}" "${file}"
    return 0
  fi
  (umask 077 && printf '%s\n' "${value}" >"${file}")
  chmod "${mode}" "${file}"
  log "made ${file}"
}

make_dir() {
  mkdir -p "$1"
  chmod 700 "$1"
}

compose() {
  local dir="${ROOT}/deployments/compose/secrets"
  make_dir "${dir}"
  put "${dir}/zk-auth" 644 "baton:$(random_hex 24)"
  put "${dir}/secrets-key" 644 "$(random_hex 32)"
  put "${dir}/store-password" 644 "$(random_hex 24)"
}

k8s() {
  local dir="${ROOT}/deployments/k8s/secrets" ns="${BATON_K8S_NAMESPACE:-baton}"
  command -v openssl >/dev/null 2>&1 || die "openssl is needed for the job store's TLS certificate"
  make_dir "${dir}"
  put "${dir}/zk-auth" 600 "baton:$(random_hex 24)"
  put "${dir}/secrets-key" 600 "$(random_hex 32)"
  put "${dir}/store-password" 600 "$(random_hex 24)"
  if [[ ! -e "${dir}/ca.crt" ]]; then
    (umask 077 && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
      -subj "/CN=baton job store CA" -keyout "${dir}/ca.key" -out "${dir}/ca.crt" 2>/dev/null)
    log "made ${dir}/ca.crt (its key ${dir}/ca.key stays here)"
  else
    log "kept ${dir}/ca.crt"
  fi
  if [[ ! -e "${dir}/baton-db.crt" ]]; then
    [[ -e "${dir}/ca.key" ]] || die "${dir}/ca.crt has no ca.key next to it: sign baton-db.crt with your CA yourself"
    local san="DNS:baton-db,DNS:baton-db.${ns},DNS:baton-db.${ns}.svc,DNS:baton-db.${ns}.svc.cluster.local"
    (umask 077 && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=baton-db" \
      -keyout "${dir}/baton-db.key" -out "${dir}/baton-db.csr" 2>/dev/null &&
      openssl x509 -req -in "${dir}/baton-db.csr" -CA "${dir}/ca.crt" -CAkey "${dir}/ca.key" -CAcreateserial \
        -days 825 -extfile <(printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "${san}") \
        -out "${dir}/baton-db.crt" 2>/dev/null)
    rm -f "${dir}/baton-db.csr"
    chmod 600 "${dir}"/*
    log "made ${dir}/baton-db.crt (${san})"
  else
    log "kept ${dir}/baton-db.crt"
  fi
}

case "${1:-}" in
compose) compose ;;
k8s) k8s ;;
*)
  echo "usage: $0 compose|k8s" >&2
  exit 2
  ;;
esac

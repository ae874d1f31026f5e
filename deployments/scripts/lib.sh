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

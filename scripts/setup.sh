#!/usr/bin/env bash
# Installs the Debian packages rewind needs when any is missing. Safe to run
# again: it does nothing when everything is there. --quiet prints nothing in
# that case.
set -euo pipefail
PKGS=(build-essential pkg-config clang libclang-rt-dev libjansson-dev libpcre2-dev libmicrohttpd-dev libunistring-dev curl time
      nginx libnginx-mod-http-js) # nginx + njs: replicas behind a balancer (scripts/cluster.sh, tests/server/test_cluster.sh)
missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  [ "${1:-}" = "--quiet" ] || echo "setup: all packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

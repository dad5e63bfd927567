#!/usr/bin/env bash
# Installs the Debian packages rewind needs when any is missing. Safe to run
# again: it does nothing when everything is there. --quiet prints nothing in
# that case. --aarch64: only what make test-aarch64 needs (the AArch64 cross
# compiler, the arm64 builds of the libraries, qemu-user), adding the arm64
# architecture to dpkg first.
set -euo pipefail
quiet=""; aarch64=""
for a in "$@"; do
  case "$a" in --quiet) quiet=1 ;; --aarch64) aarch64=1 ;; esac
done
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
# missing PKG...: the packages among PKG that dpkg does not have installed
missing() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}
if [ -n "$aarch64" ]; then
  ARM_PKGS=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user pkg-config libc6:arm64
            libjansson-dev:arm64 libpcre2-dev:arm64 libmicrohttpd-dev:arm64 libunistring-dev:arm64)
  mapfile -t need < <(missing "${ARM_PKGS[@]}")
  if [ ${#need[@]} -eq 0 ]; then
    [ -n "$quiet" ] || echo "setup: all aarch64 packages present"
    exit 0
  fi
  echo "setup: installing ${need[*]}"
  dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
  exit 0
fi
PKGS=(build-essential pkg-config clang libclang-rt-dev libjansson-dev libpcre2-dev libmicrohttpd-dev libunistring-dev curl time
      nginx libnginx-mod-http-js # nginx + njs: replicas behind a balancer (scripts/cluster.sh, tests/server/test_cluster.sh)
      python3 python3-venv python3-pip python3-setuptools python3-wheel) # the Python bindings' tests (tests/python)
mapfile -t missing < <(missing "${PKGS[@]}")
if [ ${#missing[@]} -eq 0 ]; then
  [ -n "$quiet" ] || echo "setup: all packages present"
else
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The client tests (tests/server/test_clients_node.sh, test_clients_chat.sh) run the real npm
# packages `openai`, `@anthropic-ai/sdk`, the Vercel AI SDK (`ai`,
# `@ai-sdk/openai-compatible`), LangChain (`@langchain/openai`), `zod` and
# `ajv`, pinned by tests/clients/package-lock.json. Optional: without node they are skipped.
# Debian's nodejs and npm are installed when there is no node at all (a node
# from elsewhere, with its own npm, is kept).
if ! command -v node >/dev/null; then
  echo "setup: installing nodejs and npm (for the client tests; optional)"
  { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends nodejs npm; } \
    || echo "setup: no nodejs; the client tests will be skipped"
fi
clients="$(cd "$(dirname "$0")/.." && pwd)/tests/clients"
if command -v npm >/dev/null && [ -f "$clients/package-lock.json" ] &&
  { [ ! -f "$clients/node_modules/.package-lock.json" ] ||
    [ "$clients/package-lock.json" -nt "$clients/node_modules/.package-lock.json" ]; }; then
  echo "setup: npm ci in tests/clients"
  (cd "$clients" && npm ci --no-audit --no-fund --loglevel=error) || echo "setup: npm ci failed; the client tests will be skipped"
fi

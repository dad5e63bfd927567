#!/usr/bin/env bash
# The real npm clients (`openai`, `@anthropic-ai/sdk`, pinned in
# tests/clients/package-lock.json, installed by scripts/setup.sh when node is
# present) against `rewind serve --alias rewind`: tests/clients/agent_apis.mjs. Skipped
# (77) without node or the modules.
set -u
REWIND="${REWIND:-build/rewind}"
FIX="${RW_FIXTURES:-../shared/fixtures}"
F="$FIX/qwen3/qwen3-Q8_0.gguf"
C="$(cd "$(dirname "$0")/../clients" && pwd)"
[ -f "$F" ] || { echo "skipped: no $F"; exit 77; }
command -v node >/dev/null || { echo "skipped: no node (scripts/setup.sh installs nodejs)"; exit 77; }
[ -d "$C/node_modules/openai" ] && [ -d "$C/node_modules/@anthropic-ai/sdk" ] \
  || { echo "skipped: no $C/node_modules (scripts/setup.sh runs npm ci there)"; exit 77; }
fail() { echo "FAIL: $*"; [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; exit 1; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT

. "$(dirname "$0")/serve_lib.sh"
serve_start "$d/log" "$F" --ctx 1024 --threads 1 --parallel 2 --api-key test-key --alias rewind
pid=$serve_pid port=$serve_port
REWIND_URL="http://127.0.0.1:$port" REWIND_KEY=test-key timeout 120 node "$C/agent_apis.mjs" > "$d/out" 2>&1
rc=$?
kill -TERM "$pid"
wait "$pid"
src=$?
pid=
[ $rc -eq 0 ] || fail "agent_apis.mjs exited $rc: $(cat "$d/out")"
[ $src -eq 0 ] || fail "serve exited $src after SIGTERM (a leak under ASan?): $(tail -20 "$d/log")"
grep -qx ok "$d/out" || fail "agent_apis.mjs: $(cat "$d/out")"
echo "ok"

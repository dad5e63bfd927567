#!/usr/bin/env bash
# The real npm clients (pinned in tests/clients/package-lock.json, installed
# by scripts/setup.sh when node is present) against `rewind serve --alias
# rewind`:
#   - `openai` and `@anthropic-ai/sdk` (tests/clients/agent_apis.mjs) on the
#     qwen3 fixture;
#   - the Vercel AI SDK (`ai` + `@ai-sdk/openai-compatible`) and LangChain
#     (`@langchain/openai`) (thinking_clients.mjs), and 30 sampled structured
#     outputs validated with ajv (structured_thinking.mjs), on the qwen35
#     fixture with Qwen3.5's chat template, which thinks by default: the
#     schema holds for the answer after the reasoning.
# Skipped (77) without node or the modules.
set -u
REWIND="${REWIND:-build/rewind}"
FIX="${RW_FIXTURES:-../shared/fixtures}"
F="$FIX/qwen3/qwen3-Q8_0.gguf"
H="$FIX/qwen35/qwen35-Q8_0.gguf"
T="$FIX/chat/templates/Qwen3.5-4B.jinja"
C="$(cd "$(dirname "$0")/../clients" && pwd)"
[ -f "$F" ] && [ -f "$H" ] && [ -f "$T" ] || { echo "skipped: no $F, $H or $T"; exit 77; }
command -v node >/dev/null || { echo "skipped: no node (scripts/setup.sh installs nodejs)"; exit 77; }
for m in openai @anthropic-ai/sdk ai @ai-sdk/openai-compatible @langchain/openai @langchain/core zod ajv ajv-formats; do
  [ -d "$C/node_modules/$m" ] || { echo "skipped: no $C/node_modules/$m (scripts/setup.sh runs npm ci there)"; exit 77; }
done
fail() { echo "FAIL: $*"; [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; exit 1; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT

. "$(dirname "$0")/serve_lib.sh"
# run_clients SCRIPT...: each script against the running server; then the server must stop cleanly
run_clients() {
  for s in "$@"; do
    REWIND_URL="http://127.0.0.1:$port" REWIND_KEY=test-key timeout 300 node "$C/$s" > "$d/out" 2>&1
    rc=$?
    [ $rc -eq 0 ] || fail "$s exited $rc: $(cat "$d/out")"
    grep -qx ok "$d/out" || fail "$s: $(cat "$d/out")"
  done
  kill -TERM "$pid"
  wait "$pid"
  src=$?
  pid=
  [ $src -eq 0 ] || fail "serve exited $src after SIGTERM (a leak under ASan?): $(tail -20 "$d/log")"
}

serve_start "$d/log" "$F" --ctx 1024 --threads 1 --parallel 2 --api-key test-key --alias rewind
pid=$serve_pid port=$serve_port
run_clients agent_apis.mjs

serve_start "$d/log" "$H" --ctx 2048 --threads 1 --parallel 2 --api-key test-key --alias rewind --chat-template-file "$T"
pid=$serve_pid port=$serve_port
run_clients thinking_clients.mjs structured_thinking.mjs
echo "ok"

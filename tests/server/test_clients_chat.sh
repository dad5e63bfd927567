#!/usr/bin/env bash
# The real `openai` npm client's chat completions with tools against
# `rewind serve` (tests/clients/chat_tools.mjs), once per chat template:
# Qwen3.5 (XML calls; its prompt opens <think>), Qwen3 (Hermes), Llama 3.1 (JSON, one call per
# message), Granite 4.0, given by --chat-template-file. The packages are
# pinned in tests/clients/package-lock.json and installed by scripts/setup.sh
# when node is present; skipped (77) without node or the modules.
set -u
REWIND="${REWIND:-build/rewind}"
FIX="${RW_FIXTURES:-../shared/fixtures}"
F="$FIX/qwen3/qwen3-Q8_0.gguf"
T="$FIX/chat/templates"
C="$(cd "$(dirname "$0")/../clients" && pwd)"
[ -f "$F" ] && [ -d "$T" ] || { echo "skipped: no $F or $T"; exit 77; }
command -v node >/dev/null || { echo "skipped: no node (scripts/setup.sh installs nodejs)"; exit 77; }
[ -d "$C/node_modules/openai" ] || { echo "skipped: no $C/node_modules (scripts/setup.sh runs npm ci there)"; exit 77; }
fail() { echo "FAIL: $*"; [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; exit 1; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT

. "$(dirname "$0")/serve_lib.sh"
for t in Qwen3.5-4B:1 Qwen-Qwen3-0.6B:0 meta-llama-Llama-3.1-8B-Instruct:0 ibm-granite-granite-4.0:0; do
  name=${t%:*} thinks=${t#*:}
  serve_start "$d/log" "$F" --ctx 2048 --threads 1 --parallel 2 --chat-template-file "$T/$name.jinja"
  pid=$serve_pid port=$serve_port
  REWIND_URL="http://127.0.0.1:$port" REWIND_THINKS=$thinks timeout 120 node "$C/chat_tools.mjs" > "$d/out" 2>&1
  rc=$?
  kill -TERM "$pid"
  wait "$pid"
  src=$?
  pid=
  [ $rc -eq 0 ] || fail "$name: chat_tools.mjs exited $rc: $(cat "$d/out")"
  [ $src -eq 0 ] || fail "$name: serve exited $src (a sanitizer report?): $(tail -20 "$d/log")"
  grep -qx ok "$d/out" || fail "$name: chat_tools.mjs: $(cat "$d/out")"
done
echo "ok"

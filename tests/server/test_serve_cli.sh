#!/usr/bin/env bash
# rewind serve end to end: the real binary on 127.0.0.1 (a free port), greedy
# completions through HTTP (curl) equal `rewind generate --print-ids` for the
# same prompt ids (with the server's numerics, auto: generate's default is
# ggml's), alone and with four clients at once; SIGTERM stops it with
# status 0.
set -u
REWIND="${REWIND:-build/rewind}"
FIX="${RW_FIXTURES:-../shared/fixtures}"
F="$FIX/qwen3/qwen3-Q8_0.gguf"
[ -f "$F" ] || { echo "skipped: no $F"; exit 77; }
command -v curl >/dev/null || { echo "skipped: no curl (scripts/setup.sh installs it)"; exit 77; }
fail() { echo "FAIL: $*"; [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; exit 1; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT

. "$(dirname "$0")/serve_lib.sh"
serve_start "$d/log" "$F" --ctx 1024 --kv f32 --threads 1 --parallel 4
pid=$serve_pid port=$serve_port

# ids: the first N of the fixture prompt; the completion's token ids vs generate's
ask() { # N_PROMPT N_GEN OUT
  local ids
  ids=$(tr -s ' \n' ' ' < "$FIX/qwen3/qwen3.prompt.ids" | cut -d' ' -f1-"$1")
  echo "$ids" > "$d/ids.$1"
  curl -s --max-time 120 "http://127.0.0.1:$port/v1/completions" \
    -d "{\"prompt\":[${ids// /,}],\"max_tokens\":$2,\"temperature\":0,\"ignore_eos\":true,\"return_token_ids\":true}" \
    | grep -o '"token_ids":\[[0-9,]*\]' | sed 's/.*\[//; s/\]//; s/,/ /g' > "$3"
}
expect() { # N_PROMPT N_GEN GOT
  "$REWIND" generate "$F" --ids "$d/ids.$1" -n "$2" --numerics auto --print-ids > "$d/want" || fail "generate failed"
  cmp -s "$d/want" "$3" || fail "prompt $1, $2 tokens: server '$(cat "$3")' vs generate '$(cat "$d/want")'"
}

ask 20 16 "$d/one"
expect 20 16 "$d/one"
for i in 1 2 3 4; do ask $((10 * i + 5)) $((8 + 4 * i)) "$d/c$i" & done
wait $(jobs -p | grep -v "^$pid\$") 2>/dev/null
for i in 1 2 3 4; do expect $((10 * i + 5)) $((8 + 4 * i)) "$d/c$i"; done

# the scripted conversation: four turns, each with its prompt tokens (the
# system prompt sized on the server's /tokenize)
"$REWIND" demo-client --port "$port" --max-tokens 4 --system-tokens 300 > "$d/demo" || fail "demo-client failed"
for turn in cold "exact repeat" "shared prefix" "extended conversation"; do
  grep -q "^$turn .* s  *[0-9]* / [0-9]" "$d/demo" || fail "demo-client table lacks '$turn': $(cat "$d/demo")"
done
p1=$(grep '^cold' "$d/demo" | awk '{print $(NF)}')
[ "$p1" -ge 300 ] && [ "$p1" -le 450 ] || fail "system prompt (300 tokens) + question out of range: $p1"

code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v1/nothing")
[ "$code" = 404 ] || fail "unknown route gave $code"

kill -TERM "$pid"
wait "$pid"
rc=$?
[ $rc -eq 0 ] || fail "serve exited $rc after SIGTERM: $(cat "$d/log")"
# the serving benchmark, tiny: two levels, JSON
"$REWIND" bench serve "$F" --clients 1,2 --requests 2 --prompt 8 --gen 4 --threads 1 --json > "$d/bench" \
  || fail "bench serve failed: $(cat "$d/bench")"
grep -q '"levels":\[{"clients":1' "$d/bench" || fail "bench serve JSON: $(cat "$d/bench")"
grep -q '"errors":0' "$d/bench" || fail "bench serve errors: $(cat "$d/bench")"
echo "ok"

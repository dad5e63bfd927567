#!/usr/bin/env bash
# The grammar work budget through the real server (docs/server-security.md,
# "Grammar work"), over the qwen3 fixture (a 512-token vocabulary, so the
# per-mask budget is scaled down with --grammar-mask-budget: the default is
# sized for 150k-token vocabularies, where tests/grammar/test_budget.c checks
# it):
#   - the grammar fuzz_gbnf found (tests/grammar/costly/masks.gbnf, masks of
#     up to 170 ms on Qwen3's vocabulary) is a 400 invalid_request_error
#     naming the budget, before any token, on /v1/completions and
#     /v1/chat/completions, streamed or not;
#   - ordinary grammars (JSON, arithmetic, lists, chess) are admitted and give
#     the same tokens as `rewind generate --grammar` (no budget there; 511 is
#     the fixture's end-of-generation token, which the server's ids include);
#   - a request that runs out of its per-request budget mid-generation ends
#     with a clear error (a 400 naming the budget; streamed: an error event
#     after its tokens), never a 500, and the server serves on.
set -u
REWIND="${REWIND:-build/rewind}"
FIX="${RW_FIXTURES:-../shared/fixtures}"
F="$FIX/qwen3/qwen3-Q8_0.gguf"
[ -f "$F" ] || { echo "skipped: no $F"; exit 77; }
command -v curl >/dev/null || { echo "skipped: no curl (scripts/setup.sh installs it)"; exit 77; }
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
fail() { echo "FAIL: $*"; [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; exit 1; }
d=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$d"' EXIT
. "$(dirname "$0")/serve_lib.sh"

# BODY ENDPOINT GRAMMAR_FILE MAX_TOKENS [STREAM]: a request body with the grammar
body() {
  python3 -c 'import json, sys
ids = [int(x) for x in open(sys.argv[5]).read().split()[:12]]
b = {"max_tokens": int(sys.argv[3]), "temperature": 0, "return_token_ids": True, "grammar": open(sys.argv[2]).read()}
if sys.argv[1] == "chat": b["messages"] = [{"role": "user", "content": "Write something."}]
else: b["prompt"] = ids
if sys.argv[4] == "1": b["stream"] = True
print(json.dumps(b))' "$1" "$2" "$3" "${4:-0}" "$FIX/qwen3/qwen3.prompt.ids"
}

serve_start "$d/log" "$F" --ctx 512 --kv f32 --threads 1 --parallel 2 --grammar-mask-budget 30000
pid=$serve_pid port=$serve_port

# the costly grammar: refused before any token, everywhere
for ep in completions chat; do
  for stream in 0 1; do
    path=/v1/completions
    [ $ep = chat ] && path=/v1/chat/completions
    st=$(serve_post "$port" $path "$(body $ep tests/grammar/costly/masks.gbnf 16 $stream)" "$d/out")
    [ "$st" = 400 ] || fail "$path stream=$stream: the costly grammar got $st: $(head -c 300 "$d/out")"
    [ "$(serve_json "$d/out" 'd["error"]["type"]')" = invalid_request_error ] || fail "$path: $(cat "$d/out")"
    grep -q "budget of one mask" "$d/out" || fail "$path: no budget named: $(cat "$d/out")"
    grep -q '"choices"\|data:' "$d/out" && fail "$path stream=$stream: tokens before the refusal: $(cat "$d/out")"
  done
done
echo "costly grammar: 400 before any token ($(serve_json "$d/out" 'd["error"]["message"]'))"

# ordinary grammars: the same tokens as rewind generate (unbudgeted)
tr -s ' \n' ' ' < "$FIX/qwen3/qwen3.prompt.ids" | cut -d' ' -f1-12 > "$d/ids"
for g in json arithmetic list chess; do
  st=$(serve_post "$port" /v1/completions "$(body completions tests/grammar/gbnf/$g.gbnf 24)" "$d/out")
  [ "$st" = 200 ] || fail "$g: $st $(head -c 300 "$d/out")"
  serve_json "$d/out" 'd["choices"][0]["token_ids"]' > "$d/got"
  "$REWIND" generate "$F" --ids "$d/ids" -n 24 --numerics auto --kv f32 --print-ids --grammar tests/grammar/gbnf/$g.gbnf \
    2> "$d/gen.err" | tr -s ' \n' ' ' | sed 's/ $//' > "$d/want" || fail "generate $g: $(cat "$d/gen.err")"
  [ -s "$d/got" ] || fail "$g: no tokens"
  # the server's ids include the end-of-generation token that ended the output; generate prints none
  [ "$(cat "$d/got")" = "$(cat "$d/want")" ] || [ "$(cat "$d/got")" = "$(cat "$d/want") 511" ] || fail "$g: server '$(cat "$d/got")' vs generate '$(cat "$d/want")'"
  st=$(serve_post "$port" /v1/chat/completions "$(body chat tests/grammar/gbnf/$g.gbnf 24)" "$d/out")
  [ "$st" = 200 ] || fail "$g chat: $st $(head -c 300 "$d/out")"
  echo "$g: admitted, $(wc -w < "$d/got") tokens as generate's"
done
kill -TERM "$pid"
wait "$pid" 2>/dev/null
pid=

# out of the per-request budget mid-generation: a clear error, not a 500; the server serves on
serve_start "$d/log2" "$F" --ctx 512 --kv f32 --threads 1 --parallel 2 --grammar-request-budget 1
pid=$serve_pid port=$serve_port
st=$(serve_post "$port" /v1/completions "$(body completions tests/grammar/gbnf/list.gbnf 24)" "$d/out")
[ "$st" = 400 ] || fail "over the request budget: $st $(head -c 300 "$d/out")"
grep -q "budget of a request" "$d/out" || fail "over the request budget: $(cat "$d/out")"
[ "$(serve_json "$d/out" 'd["error"]["type"]')" = invalid_request_error ] || fail "$(cat "$d/out")"
st=$(serve_post "$port" /v1/completions "$(body completions tests/grammar/gbnf/list.gbnf 24 1)" "$d/out")
[ "$st" = 200 ] || fail "streamed, over the request budget: $st"
grep -q "budget of a request" "$d/out" || fail "streamed: no error event: $(cat "$d/out")"
st=$(serve_post "$port" /v1/completions '{"prompt":"hello","max_tokens":4}' "$d/out")
[ "$st" = 200 ] || fail "a plain request after: $st"
echo "over the request budget: 400 (streamed: an error event), the server serves on"
kill -TERM "$pid"
wait "$pid" 2>/dev/null
pid=
echo "ok"

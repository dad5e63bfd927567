#!/usr/bin/env bash
# Structured outputs end to end on the qwen3 fixture (random weights, so any
# valid output is the grammar's doing):
#   - `rewind generate --json-schema` for every other schema in schemas/
#     (every fourth under the sanitizers), sampled: each output that ends (not
#     cut by -n) validates against its schema (test_schema --validate, our
#     JSON Schema checker), and most end (a random-weight model falls into
#     loops like "dog dog dog" inside an unbounded string, which only -n
#     ends: such an output is cut, a prefix of a valid one);
#   - `rewind generate --grammar` for the example grammars: outputs match;
#   - the server (every schema; every other one under the sanitizers):
#     response_format json_schema / json_object, llama.cpp's
#     json_schema and grammar fields, chat and completions: outputs validate,
#     finish_reason "length" when max_tokens cuts, and a schema or grammar
#     that does not compile is a 400 that names the field and the place.
set -u
REWIND="${REWIND:-build/rewind}"
BUILD="${RW_BUILD:-build}"
FIX="${RW_FIXTURES:-../shared/fixtures}"
M="$FIX/qwen3/qwen3-Q8_0.gguf"
V="$BUILD/tests/grammar/test_schema"
S=tests/grammar/schemas
[ -f "$M" ] || { echo "skipped: no $M"; exit 77; }
[ -x "$V" ] || { echo "skipped: no $V (make all builds it)"; exit 77; }
command -v curl >/dev/null || { echo "skipped: no curl"; exit 77; }
d=$(mktemp -d)
pids=()
fail() { echo "FAIL: $*"; for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; exit 1; }
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; [ -n "${KEEP:-}" ] || rm -rf "$d"' EXIT

# ---- rewind generate --json-schema, every schema, three seeds ----
n_ok=0 n_cut=0 k=0
for f in "$S"/*.json; do
  k=$((k + 1))
  step=2
  [ "${RW_SANITIZE:-0}" = 1 ] && step=4
  [ $((k % step)) = 1 ] || continue
  for seed in $k; do
    out="$d/out.json"
    "$REWIND" generate "$M" -p "Answer in JSON:" -n 400 --temp 1 --seed "$seed" --json-schema "$f" \
      > "$out" 2> "$d/err" || fail "generate $f seed $seed: $(cat "$d/err")"
    if grep -q "cut the output" "$d/err"; then
      n_cut=$((n_cut + 1))
      continue
    fi
    "$V" --validate "$f" "$out" 2> "$d/why" || fail "generate $f seed $seed: $(cat "$d/why"): $(head -c 300 "$out")"
    n_ok=$((n_ok + 1))
  done
done
echo "generate: $n_ok outputs valid, $n_cut cut by -n"
[ $((n_cut * 4)) -le $((n_ok + n_cut)) ] || fail "more than 25% of the outputs were cut by -n"

# ---- rewind generate --grammar: the example grammars (and with a draft) ----
for g in json arithmetic list chess; do
  for seed in 4 5; do
    "$REWIND" generate "$M" -p "go" -n 300 --temp 1 --seed "$seed" --grammar "tests/grammar/gbnf/$g.gbnf" \
      > "$d/g.out" 2> "$d/err" || fail "generate --grammar $g: $(cat "$d/err")"
    grep -q "cut the output" "$d/err" && continue
    # an independent check of each language (JSON: our checker; the others: line regexes)
    case $g in
      json) echo '{}' > "$d/any.json" && "$V" --validate "$d/any.json" "$d/g.out" || fail "json grammar output is not JSON: $(cat "$d/g.out")" ;;
      list) grep -qvE '^(- .+)?$' "$d/g.out" && fail "list output: $(cat "$d/g.out")" ;;
      chess) grep -qvE '^([1-9]\. [a-hNBKQRxO0-9=+#-]+ [a-hNBKQRxO0-9=+#-]+)?$' "$d/g.out" && fail "chess output: $(cat "$d/g.out")" ;;
      arithmetic) grep -qvE '^([-+*/()a-z0-9_ \t]+=[ \t]*[-+*/()a-z0-9_ \t]+)?$' "$d/g.out" && fail "arithmetic output: $(cat "$d/g.out")" ;;
    esac
  done
done
"$REWIND" generate "$M" -p "go" -n 200 --seed 3 --json-schema "$S/10_recursive.json" > "$d/a" 2>/dev/null &&
  "$REWIND" generate "$M" -p "go" -n 200 --seed 3 --json-schema "$S/10_recursive.json" \
    --draft "$FIX/qwen3/qwen3-Q4_0.gguf" --draft-fixed > "$d/b" 2>/dev/null || fail "generate with a draft"
cmp -s "$d/a" "$d/b" || fail "greedy constrained output differs with a draft: $(cat "$d/a") / $(cat "$d/b")"
echo '{"type":"object","properties":{"a":{"type":"string","pattern":"(?=x)"}}}' > "$d/bad.json"
"$REWIND" generate "$M" -p "go" -n 5 --json-schema "$d/bad.json" > /dev/null 2> "$d/err" && fail "bad schema accepted"
grep -q "schema at /properties/a: pattern: lookarounds" "$d/err" || fail "bad schema message: $(cat "$d/err")"

# ---- the server ----
. tests/server/serve_lib.sh
serve_start "$d/serve.log" "$M" --ctx 1024 --kv f32 --threads 1 --parallel 4
pids+=("$serve_pid")
url="http://127.0.0.1:$serve_port/v1"
post() { # ENDPOINT BODY -> $d/resp, echoes the HTTP status
  curl -s --max-time 120 -o "$d/resp" -w '%{http_code}' "$url/$1" -H 'Content-Type: application/json' -d "$2"
}
content() { # the choice's text (chat or completion) of $d/resp into $d/content
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); c=r["choices"][0]; sys.stdout.write(c["message"]["content"] if "message" in c else c["text"]); open(sys.argv[2],"w").write(c["finish_reason"])' \
    "$d/resp" "$d/finish" > "$d/content"
}
n_ok=0 n_cut=0
i=0
for f in "$S"/*.json; do
  i=$((i + 1))
  [ "${RW_SANITIZE:-0}" = 1 ] && [ $((i % 2)) = 0 ] && continue
  schema=$(cat "$f")
  case $((i % 3)) in
    0) body="{\"messages\":[{\"role\":\"user\",\"content\":\"json please\"}],\"max_tokens\":500,\"seed\":$i,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"t\",\"schema\":$schema,\"strict\":true}}}"; ep=chat/completions ;;
    1) body="{\"prompt\":\"json:\",\"max_tokens\":500,\"seed\":$i,\"json_schema\":$schema}"; ep=completions ;;
    2) body="{\"messages\":[{\"role\":\"user\",\"content\":\"json\"}],\"max_tokens\":500,\"seed\":$i,\"temperature\":0.7,\"json_schema\":$schema}"; ep=chat/completions ;;
  esac
  code=$(post $ep "$body")
  [ "$code" = 200 ] || fail "server $f: HTTP $code: $(head -c 300 "$d/resp")"
  content
  if [ "$(cat "$d/finish")" = length ]; then n_cut=$((n_cut + 1)); continue; fi
  [ "$(cat "$d/finish")" = stop ] || fail "server $f: finish $(cat "$d/finish")"
  "$V" --validate "$f" "$d/content" 2> "$d/why" || fail "server $f: $(cat "$d/why"): $(head -c 300 "$d/content")"
  n_ok=$((n_ok + 1))
done
echo "server: $n_ok outputs valid, $n_cut cut by max_tokens"
[ $((n_cut * 4)) -le $((n_ok + n_cut)) ] || fail "more than 25% of the server outputs were cut"

# json_object: a JSON object; grammar (GBNF): matches
code=$(post chat/completions '{"messages":[{"role":"user","content":"x"}],"max_tokens":600,"seed":5,"response_format":{"type":"json_object"}}')
[ "$code" = 200 ] || fail "json_object: HTTP $code"
content
if [ "$(cat "$d/finish")" = stop ]; then
  python3 -c 'import json,sys; assert isinstance(json.load(open(sys.argv[1])), dict)' "$d/content" ||
    fail "json_object: not an object: $(cat "$d/content")"
fi
code=$(post completions '{"prompt":"x","max_tokens":50,"seed":2,"grammar":"root ::= (\"yes\" | \"no\") \" \" [0-9]{2}\n"}')
[ "$code" = 200 ] || fail "grammar: HTTP $code: $(cat "$d/resp")"
content
grep -qE '^(yes|no) [0-9]{2}$' "$d/content" || fail "grammar output: $(cat "$d/content")"
[ "$(cat "$d/finish")" = stop ] || fail "grammar finish: $(cat "$d/finish")"
# max_tokens cuts: length
code=$(post completions "{\"prompt\":\"x\",\"max_tokens\":3,\"json_schema\":$(cat "$S/01_flat.json")}")
content
[ "$(cat "$d/finish")" = length ] || fail "cut output: finish $(cat "$d/finish")"
# errors: 400 naming the field and the place
code=$(post completions '{"prompt":"x","grammar":"root ::= foo\n"}')
[ "$code" = 400 ] && grep -q "grammar: gbnf line 1 col 10: rule 'foo' is not defined" "$d/resp" &&
  grep -q '"param":"grammar"' "$d/resp" || fail "bad grammar: $code $(cat "$d/resp")"
code=$(post chat/completions '{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}}}}}')
[ "$code" = 400 ] && grep -q "schema at /properties/a: uniqueItems is not supported" "$d/resp" ||
  fail "bad schema: $code $(cat "$d/resp")"
code=$(post chat/completions '{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"yaml"}}')
[ "$code" = 400 ] || fail "bad response_format type: $code"
code=$(post completions '{"prompt":"x","grammar":"root ::= \"a\"\n","json_schema":{}}')
[ "$code" = 400 ] && grep -q "only one of" "$d/resp" || fail "two constraints: $code $(cat "$d/resp")"
echo "ok"

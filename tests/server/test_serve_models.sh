#!/usr/bin/env bash
# One server, several models (--model [ALIAS=]FILE, --models-max-bytes),
# on two different fixture models (qwen3 Q4_0 and llama Q8_0):
# - 8 concurrent requests alternating the models, greedy and seeded
#   sampling, completions and chat: every answer (text and token ids) is
#   bitwise the one-model server's on the same file; a request without a
#   model, or naming the default's file, goes to the default;
# - /tokenize, /v1/embeddings and /props follow the model field (?model=);
# - /v1/models lists both in OpenAI's and (anthropic-version) Anthropic's
#   shape, with whether each is loaded; an unknown model is a 404 in each
#   API's error shape (model_not_found / not_found_error);
# - --models-max-bytes below the two files together: requests alternating
#   the models, sequential and concurrent, all answer the one-model answers
#   while the server unloads and reloads (the log and /metrics count it);
# - --cache-dir: each model's disk tier in its own folder;
# - /metrics: the per-model series;
# - a model whose file is gone: a 500 (model_load_failed), the others
#   still served; duplicate names and a missing file at start.
set -u
REWIND="${REWIND:-build/rewind}"
FIX="${RW_FIXTURES:-../shared/fixtures}"
Q="$FIX/qwen3/qwen3-Q4_0.gguf"
L="$FIX/llama/llama-Q8_0.gguf"
for f in "$Q" "$L"; do [ -f "$f" ] || { echo "skipped: no $f"; exit 77; }; done
command -v curl >/dev/null || { echo "skipped: no curl (scripts/setup.sh installs it)"; exit 77; }
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
d=$(mktemp -d)
pid=
fail() { echo "FAIL: $*"; [ -n "$pid" ] && kill "$pid" 2>/dev/null; exit 1; }
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$d"' EXIT
. "$(dirname "$0")/serve_lib.sh"
OPTS=(--ctx 256 --kv f32 --threads 1 --parallel 4)
start() { # LOG serve arguments...
  local log=$1
  shift
  serve_start "$log" "$@" "${OPTS[@]}"
  pid=$serve_pid port=$serve_port
}
stop() {
  kill -TERM "$pid"
  wait "$pid" || fail "serve exited $? after SIGTERM"
  pid=
}
post() { # PATH BODY OUT [header] -> prints the HTTP status
  local h=()
  [ -n "${4:-}" ] && h=(-H "$4")
  curl -s --max-time 120 "${h[@]}" -o "$3" -w '%{http_code}' "http://127.0.0.1:$port$1" -d "$2"
}
py() { python3 - "$d" "$@" || fail "check failed: $*"; }

# the requests: i even to q, odd to l; greedy or seeded; completions or chat
N=8
body_of() { # I -> the request body without a model
  local i=$1 t=0 s=0
  [ $((i % 4)) -ge 2 ] && t=0.9 s=$((1000 + i))
  if [ $((i % 3)) = 2 ]; then
    echo "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell story $i\"}],\"max_tokens\":12,\"temperature\":$t,\"seed\":$s,\"ignore_eos\":true,\"return_token_ids\":true}"
  else
    echo "{\"prompt\":\"Once upon a time, story $i\",\"max_tokens\":12,\"temperature\":$t,\"seed\":$s,\"ignore_eos\":true,\"return_token_ids\":true}"
  fi
}
body() { # I MODEL ("": none) -> the request body
  if [ -n "$2" ]; then body_of "$1" | sed "s/^{/{\"model\":\"$2\",/"; else body_of "$1"; fi
}
route() { [ $(($1 % 3)) = 2 ] && echo /v1/chat/completions || echo /v1/completions; }
model_of() { [ $(($1 % 2)) = 0 ] && echo q || echo l; }
ask() { # I MODEL OUT: the answer's text and token ids into OUT
  local st
  st=$(post "$(route "$1")" "$(body "$1" "$2")" "$3.json")
  [ "$st" = 200 ] || { echo "status $st: $(cat "$3.json")" > "$3"; return; }
  # the text (a JSON string, escapes and all) and the ids, by grep: python takes seconds to start on a busy machine
  grep -o '"\(text\|content\)":"\([^"\\]\|\\.\)*"' "$3.json" > "$3"
  grep -o '"token_ids":\[[0-9,]*\]' "$3.json" >> "$3"
  [ "$(wc -l < "$3")" = 2 ] || echo "no text and token ids in $(cat "$3.json")" >> "$3"
}
same() { # WANT GOT WHAT
  cmp -s "$1" "$2" || fail "$3: '$(cat "$2")' differs from the one-model server's '$(cat "$1")'"
}

# ---- the one-model answers ----
for m in q l; do
  f=$Q
  [ $m = l ] && f=$L
  start "$d/$m.log" "$f" --alias $m
  for i in $(seq 0 $((N - 1))); do [ "$(model_of "$i")" = $m ] && ask "$i" $m "$d/want.$i"; done
  ask 0 "$m" "$d/want.alone.$m" # the same request body with this model, for the default checks
  post /tokenize '{"content":"Hello world, again"}' "$d/tok.$m" > /dev/null
  post /v1/embeddings '{"input":"Hello world"}' "$d/emb.$m" > /dev/null
  stop
done
# the two models answer differently (so a request routed to the wrong one shows)
! cmp -s "$d/want.alone.q" "$d/want.alone.l" || fail "both models give the same answer: no routing test"
! cmp -s "$d/emb.q" "$d/emb.l" || fail "both models give the same embedding: no routing test"
grep -q '"tokens":\[' "$d/tok.q" || fail "/tokenize: $(cat "$d/tok.q")"

# ---- two models in one server under concurrent load ----
start "$d/two.log" --model q="$Q" --model l="$L"
grep -q 'also model l' "$d/two.log" || fail "the second model is not announced: $(cat "$d/two.log")"
for i in $(seq 0 $((N - 1))); do ask "$i" "$(model_of "$i")" "$d/got.$i" & done
wait $(jobs -p | grep -v "^$pid\$") 2>/dev/null
for i in $(seq 0 $((N - 1))); do same "$d/want.$i" "$d/got.$i" "request $i to $(model_of "$i")"; done
# the default: no model, and the default's file name
ask 0 "" "$d/nomodel"
same "$d/want.alone.q" "$d/nomodel" "no model: the default"
ask 0 qwen3-Q4_0.gguf "$d/byfile"
same "$d/want.alone.q" "$d/byfile" "the default by its file name"
ask 0 llama-Q8_0.gguf "$d/byfile.l"
same "$d/want.alone.l" "$d/byfile.l" "the second model by its file name"
# the other routes follow the model field
for m in q l; do
  post /tokenize "{\"model\":\"$m\",\"content\":\"Hello world, again\"}" "$d/tok2.$m" > /dev/null
  cmp -s "$d/tok.$m" "$d/tok2.$m" || fail "/tokenize for $m: $(cat "$d/tok2.$m") vs $(cat "$d/tok.$m")"
  post /v1/embeddings "{\"model\":\"$m\",\"input\":\"Hello world\"}" "$d/emb2.$m" > /dev/null
  py "$d/emb.$m" "$d/emb2.$m" "$m" <<'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[2:4])
assert a["data"][0]["embedding"] == b["data"][0]["embedding"], "embeddings differ"
assert b["model"] == sys.argv[4], b["model"]
EOF
  st=$(curl -s -o "$d/props.$m" -w '%{http_code}' "http://127.0.0.1:$port/props?model=$m")
  [ "$st" = 200 ] && grep -q "\"model_alias\":\"$m\"" "$d/props.$m" || fail "/props?model=$m: $st $(cat "$d/props.$m")"
done
# /v1/models in both shapes, both loaded now
st=$(curl -s -o "$d/models" -w '%{http_code}' "http://127.0.0.1:$port/v1/models")
[ "$st" = 200 ] || fail "/v1/models: $st"
st=$(curl -s -H 'anthropic-version: 2023-06-01' -o "$d/models.a" -w '%{http_code}' "http://127.0.0.1:$port/v1/models")
[ "$st" = 200 ] || fail "/v1/models (Anthropic): $st"
py "$d/models" "$d/models.a" <<'EOF'
import json, sys
o = json.load(open(sys.argv[2]))
assert o["object"] == "list" and [m["id"] for m in o["data"]] == ["q", "l"], o
assert all(m["object"] == "model" and m["loaded"] is True and m["max_model_len"] == 256 for m in o["data"]), o
a = json.load(open(sys.argv[3]))
assert [m["id"] for m in a["data"]] == ["q", "l"] and a["first_id"] == "q" and a["last_id"] == "l", a
assert a["has_more"] is False and all(m["type"] == "model" and m["display_name"] for m in a["data"]), a
EOF
# unknown models: 404 in each API's shape
st=$(post /v1/chat/completions '{"model":"nope","messages":[{"role":"user","content":"hi"}]}' "$d/e1")
[ "$st" = 404 ] || fail "unknown model (chat): $st $(cat "$d/e1")"
st=$(post /v1/completions '{"model":"nope","prompt":"hi"}' "$d/e2")
[ "$st" = 404 ] || fail "unknown model (completions): $st $(cat "$d/e2")"
st=$(post /v1/messages '{"model":"nope","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}' "$d/e3" \
  'anthropic-version: 2023-06-01')
[ "$st" = 404 ] || fail "unknown model (messages): $st $(cat "$d/e3")"
st=$(curl -s -H 'anthropic-version: 2023-06-01' -o "$d/e4" -w '%{http_code}' "http://127.0.0.1:$port/v1/models/nope")
[ "$st" = 404 ] || fail "unknown model (Anthropic models.retrieve): $st"
st=$(curl -s -o "$d/e5" -w '%{http_code}' "http://127.0.0.1:$port/v1/models/nope")
[ "$st" = 404 ] || fail "unknown model (models.retrieve): $st"
st=$(post /v1/embeddings '{"model":"nope","input":"hi"}' "$d/e6")
[ "$st" = 404 ] || fail "unknown model (embeddings): $st $(cat "$d/e6")"
py "$d/e1" "$d/e2" "$d/e3" "$d/e4" "$d/e5" "$d/e6" <<'EOF'
import json, sys
for i in (2, 3, 6, 7):
    e = json.load(open(sys.argv[i]))["error"]
    assert e["code"] == "model_not_found" and e["type"] == "invalid_request_error" and "nope" in e["message"], e
for i in (4, 5):
    o = json.load(open(sys.argv[i]))
    assert o["type"] == "error" and o["error"]["type"] == "not_found_error" and "nope" in o["error"]["message"], o
EOF
curl -s "http://127.0.0.1:$port/metrics" > "$d/metrics"
grep -q '^rewind_model_loaded{model="q"} 1$' "$d/metrics" && grep -q '^rewind_model_loaded{model="l"} 1$' "$d/metrics" \
  || fail "/metrics: $(grep rewind_model_ "$d/metrics")"
gen=$(awk '$1 == "rewind_generated_tokens_total" {print $2}' "$d/metrics")
[ "${gen:-0}" -ge $((12 * N)) ] || fail "/metrics: $gen generated tokens over both models"
curl -s "http://127.0.0.1:$port/health" | grep -q '"ok"' || fail "/health"
stop

# ---- a budget for one model at a time: unload and reload, no request lost ----
budget=$(($(stat -c %s "$L") + 4096)) # either file fits, not both
start "$d/budget.log" --model q="$Q" --model l="$L" --models-max-bytes $budget
for round in 1 2; do # sequential, alternating: every request switches models
  for i in $(seq 0 $((N - 1))); do
    ask "$i" "$(model_of "$i")" "$d/b.$round.$i"
    same "$d/want.$i" "$d/b.$round.$i" "budget, sequential request $i (round $round)"
  done
done
st=$(curl -s -o "$d/models.b" -w '%{http_code}' "http://127.0.0.1:$port/v1/models")
py "$d/models.b" <<'EOF'
import json, sys
o = {m["id"]: m["loaded"] for m in json.load(open(sys.argv[2]))["data"]}
assert o == {"q": False, "l": True}, o # the last request was l's: q made room for it
EOF
for round in 1 2 3; do # concurrent: requests for the other model wait, never fail
  for i in $(seq 0 $((N - 1))); do ask "$i" "$(model_of "$i")" "$d/c.$round.$i" & done
  wait $(jobs -p | grep -v "^$pid\$") 2>/dev/null
  for i in $(seq 0 $((N - 1))); do same "$d/want.$i" "$d/c.$round.$i" "budget, concurrent request $i (round $round)"; done
done
curl -s "http://127.0.0.1:$port/metrics" > "$d/metrics.b"
unloads=$(awk -F' ' '/^rewind_model_unloads_total/ {s += $2} END {print s + 0}' "$d/metrics.b")
[ "$unloads" -ge 16 ] || fail "only $unloads unloads under the budget: $(grep rewind_model_ "$d/metrics.b")"
loaded=$(awk '/^rewind_model_loaded/ {s += $2} END {print s + 0}' "$d/metrics.b")
[ "$loaded" = 1 ] || fail "$loaded models loaded within a budget for one: $(grep rewind_model_ "$d/metrics.b")"
grep -q 'unloaded model q' "$d/budget.log" && grep -q 'unloaded model l' "$d/budget.log" \
  || fail "the log shows no unloads: $(cat "$d/budget.log")"
stop

# ---- the disk tier: a folder per model ----
start "$d/disk.log" --model q="$Q" --model l="$L" --cache-dir "$d/cache" --cache-dir-delay 0
ask 0 q "$d/disk.0"
ask 1 l "$d/disk.1"
same "$d/want.0" "$d/disk.0" "with a disk tier (q)"
same "$d/want.1" "$d/disk.1" "with a disk tier (l)"
stop
for m in q l; do
  [ -n "$(ls -A "$d/cache/$m" 2>/dev/null)" ] || fail "no disk-tier files in $d/cache/$m: $(ls -R "$d/cache")"
done

# ---- a model that cannot be loaded: a 500 that says so, the others still served ----
cp "$L" "$d/gone.gguf"
start "$d/gone.log" --model q="$Q" --model gone="$d/gone.gguf"
rm "$d/gone.gguf"
st=$(post /v1/completions '{"model":"gone","prompt":"hi","max_tokens":2}' "$d/gone.json")
[ "$st" = 500 ] && grep -q '"code":"model_load_failed"' "$d/gone.json" || fail "unloadable model: $st $(cat "$d/gone.json")"
ask 0 q "$d/after.0"
same "$d/want.0" "$d/after.0" "the default after another model failed to load"
stop

# ---- command-line errors ----
"$REWIND" serve --model a="$Q" --model a="$L" --port 0 2> "$d/dup.err"
[ $? = 2 ] && grep -q 'two models are named "a"' "$d/dup.err" || fail "duplicate names: $(cat "$d/dup.err")"
"$REWIND" serve "$Q" --model "$d/none.gguf" --port 0 2> "$d/none.err"
[ $? = 1 ] && grep -q 'none.gguf' "$d/none.err" || fail "a missing second file: $(cat "$d/none.err")"
echo ok

#!/usr/bin/env bash
# rewind serve --spec mtp,ngram: speculative decoding with the model's own
# MTP block and n-gram drafts through the real server on loopback. A server
# with them and one without (the qwen35mtp fixture: DeltaNet + attention +
# the MTP block) answer the same greedy requests with byte-identical bodies
# (tokens, text, logprobs, finish reason; ids and usage aside): alone, with
# four clients at once, and on a prefix-cache hit (the same prompt again:
# the MTP states come from the cache entry with the sequence). /metrics
# shows drafted tokens. --spec mtp on a model without the block is refused
# at start, and a bad --spec value is a usage error.
set -u
REWIND="${REWIND:-build/rewind}"
FIX="${RW_FIXTURES:-../shared/fixtures}"
F="$FIX/qwen35mtp/qwen35mtp-F32.gguf"
N="$FIX/qwen35/qwen35-Q8_0.gguf"
[ -f "$F" ] && [ -f "$N" ] || { echo "skipped: no $F"; exit 77; }
command -v curl >/dev/null || { echo "skipped: no curl (scripts/setup.sh installs it)"; exit 77; }
d=$(mktemp -d)
pids=()
fail() { echo "FAIL: $*"; for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; exit 1; }
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; [ -n "${KEEP:-}" ] || rm -rf "$d"' EXIT

. "$(dirname "$0")/serve_lib.sh"

# refused: no MTP block; a bad value
"$REWIND" serve "$N" --port 0 --spec mtp 2> "$d/bad.log"
rc=$?
[ $rc -eq 1 ] || fail "--spec mtp without the block: serve exited $rc: $(cat "$d/bad.log")"
grep -q "no MTP block" "$d/bad.log" || fail "no clear error: $(cat "$d/bad.log")"
"$REWIND" serve "$F" --port 0 --spec eagle 2> "$d/bad2.log"
[ $? -eq 2 ] || fail "--spec eagle: not a usage error: $(cat "$d/bad2.log")"

start() { # NAME serve-options...
  local name=$1
  shift
  serve_start "$d/$name.log" "$F" --ctx 256 --kv f32 --threads 1 --parallel 4 "$@"
  pids+=("$serve_pid")
  echo "$serve_port" > "$d/$name.port"
}
ask() { # NAME OUT BODY
  curl -s --max-time 120 "http://127.0.0.1:$(cat "$d/$1.port")/v1/completions" -d "$3" > "$d/$1.$2.raw"
  sed 's/"id":"[^"]*"//g; s/"created":[0-9]*//g; s/"usage":{[^}]*}[^}]*}//g' "$d/$1.$2.raw" > "$d/$1.$2"
  grep -q '"token_ids"' "$d/$1.$2" || fail "$1 $2: no tokens: $(head -c 400 "$d/$1.$2.raw")"
}
same() {
  cmp -s "$d/plain.$1" "$d/spec.$1" ||
    fail "$1 differs with --spec: $(head -c 600 "$d/spec.$1") vs $(head -c 600 "$d/plain.$1")"
}
ids_of() { tr -s ' \n' ' ' < "$FIX/qwen35mtp/qwen35mtp.prompt.ids" | cut -d' ' -f"$1" | sed 's/ *$//; s/ /,/g'; }
# the logit bias makes token 15 win often, so drafts get accepted too
# (random weights alone almost never agree; tests/engine/test_spec_mtp.c)
req() { # PROMPT_IDS MAX_TOKENS
  echo "{\"prompt\":[$1],\"max_tokens\":$2,\"temperature\":0,\"ignore_eos\":true,\"return_token_ids\":true,\"logprobs\":2,\"logit_bias\":{\"15\":8}}"
}

start plain
start spec --spec mtp,ngram --spec-ngram-n 2 --draft-max 3 --draft-fixed
for s in plain spec; do ask $s one "$(req "$(ids_of 1-40)" 24)"; done
same one
# four clients at once
for s in plain spec; do
  cp=()
  for i in 1 2 3 4; do
    ask $s "par$i" "$(req "$(ids_of $i-$((30 + 5 * i)))" 20)" &
    cp+=($!)
  done
  wait "${cp[@]}" # not the servers
done
for i in 1 2 3 4; do same "par$i"; done
# a prefix-cache hit: the first request's prompt again
for s in plain spec; do ask $s again "$(req "$(ids_of 1-40)" 24)"; done
same again
cmp -s "$d/spec.one" "$d/spec.again" || fail "the cache hit answers otherwise"
grep -q '"cached_tokens":[1-9]' "$d/spec.again.raw" || fail "no cache hit: $(head -c 300 "$d/spec.again.raw")"
curl -s "http://127.0.0.1:$(cat "$d/spec.port")/metrics" > "$d/m"
grep -q '^rewind_spec_drafted_tokens_total [1-9]' "$d/m" || fail "no drafted tokens in /metrics: $(grep spec "$d/m")"
grep -q '^rewind_spec_accepted_tokens_total [1-9]' "$d/m" || fail "no accepted drafts in /metrics: $(grep spec "$d/m")"
echo "ok: --spec mtp,ngram bodies equal plain ($(grep '^rewind_spec_accepted_tokens_total' "$d/m"))"

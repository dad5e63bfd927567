#!/usr/bin/env bash
# Sliding-window models through the real server, with prompts far longer
# than their sliding layers' windows (the fixtures' are 16 and 8
# positions; a sequence holds a ring of about W + 320, and below it a dense
# span as far as its budget pays, here all of it): every answer equals the
# one a server without a prefix cache gives the same prompt alone, byte for
# byte (tokens, text, logprobs), and the cache's figures (usage's
# cached_tokens) say at most 64 of the shared tokens were recomputed:
# after prefix-cache hits 610 and 310 tokens before the cached entry's end,
# a hit inside the ring, an exact repeat (nothing recomputed), three
# clients at once, n-gram speculation, a draft model, and the disk tier
# after a restart.
set -u
REWIND="${REWIND:-build/rewind}"
FIX="${RW_FIXTURES:-../shared/fixtures}"
[ -f "$FIX/gemma3/gemma3-Q8_0.gguf" ] || { echo "skipped: no $FIX/gemma3"; exit 77; }
command -v curl >/dev/null || { echo "skipped: no curl (scripts/setup.sh installs it)"; exit 77; }
d=$(mktemp -d)
pids=()
fail() { echo "FAIL: $*"; for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; exit 1; }
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; [ -n "${KEEP:-}" ] || rm -rf "$d"' EXIT

. "$(dirname "$0")/serve_lib.sh"
start() { # NAME MODEL serve-options... -> port in $d/NAME.port
  local name=$1 model=$2
  shift 2
  serve_start "$d/$name.log" "$model" --ctx 2048 --kv f32 --threads 1 "$@"
  pids+=("$serve_pid")
  echo "$serve_port" > "$d/$name.port"
}
stop_all() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  wait
  pids=()
}
ask() { # NAME OUT PROMPT_IDS -> $d/NAME.OUT (ids, times and usage cut; the raw body in .raw)
  curl -s --max-time 300 "http://127.0.0.1:$(cat "$d/$1.port")/v1/completions" \
    -d "{\"prompt\":[$3],\"max_tokens\":10,\"temperature\":0,\"ignore_eos\":true,\"return_token_ids\":true,\"logprobs\":2}" \
    > "$d/$1.$2.raw"
  sed 's/"id":"[^"]*"//g; s/"created":[0-9]*//g; s/"usage":{[^}]*}[^}]*}//g; s/"model":"[^"]*"//g' \
    "$d/$1.$2.raw" > "$d/$1.$2"
  grep -q '"token_ids"' "$d/$1.$2" || fail "$1 $2: no tokens: $(head -c 400 "$d/$1.$2.raw")"
}
same() { # NAME OUT: equal to the solo server's answer
  cmp -s "$d/solo.$2" "$d/$1.$2" || fail "$T: $1 $2 differs: $(head -c 500 "$d/$1.$2") vs $(head -c 500 "$d/solo.$2")"
}
cached() { # NAME OUT -> the request's cached prompt tokens
  grep -o '"cached_tokens":[0-9]*' "$d/$1.$2.raw" | head -1 | cut -d: -f2
}
ids() { # FIRST COUNT SEED: COUNT token ids in [4, 500), comma separated
  awk -v a="$1" -v n="$2" -v s="$3" 'BEGIN { for (i = a; i < a + n; i++) printf "%s%d", (i > a ? "," : ""), 4 + (i * 37 + s * 101 + int(i / 7) * 13) % 496 }'
}

models="gemma3/gemma3-Q8_0 gpt-oss/gpt-oss-MXFP4_MOE"
# the sanitizer build: one model, no speculation (each pass is about 20x slower there)
[ "${RW_SANITIZE:-0}" = 1 ] && models="gemma3/gemma3-Q8_0"
for T in $models; do
  F="$FIX/$T.gguf"
  [ -f "$F" ] || continue
  P1=$(ids 0 900 1)
  P2="$(ids 0 600 1),$(ids 600 150 2)" # shares 600 of P1's tokens: far before its entry's end
  P3="$(ids 0 880 1),$(ids 880 30 3)"  # shares 880: inside the ring
  P4="$(ids 0 300 4)"
  P5="$(ids 0 300 1),$(ids 300 60 5)" # shares 300 of P1's: 610 before its entry's end (900 + 10 answered)
  start solo "$F" --cache-bytes 0 --parallel 1
  for p in 1 2 3 4 5; do eval "ask solo p$p \"\$P$p\""; done
  stop_all
  start cache "$F" --cache-bytes 1G --parallel 4 --cache-dir "$d/disk-${T%%/*}"
  ask cache p1 "$P1"
  ask cache p5 "$P5"
  ask cache p2 "$P2"
  ask cache p3 "$P3"
  ask cache r1 "$P1"
  for o in p1 p5 p2 p3; do same cache $o; done
  cp "$d/cache.r1" "$d/cache.p1r"
  cmp -s "$d/solo.p1" "$d/cache.r1" || fail "$T: the exact repeat differs"
  # at most 64 of the shared tokens recomputed, wherever the prompt leaves the entry
  [ "$(cached cache p5)" -ge $((300 - 64)) ] || fail "$T: P5 reused $(cached cache p5) tokens of 300"
  [ "$(cached cache p2)" -ge $((600 - 64)) ] || fail "$T: P2 reused $(cached cache p2) tokens of 600"
  [ "$(cached cache p3)" -ge $((880 - 64)) ] || fail "$T: P3 reused $(cached cache p3) tokens of 880"
  echo "$T: cached tokens: $(cached cache p5) of 300 shared, $(cached cache p2) of 600, $(cached cache p3) of 880, $(cached cache r1) of the 900 repeated"
  [ "$(cached cache r1)" -ge 896 ] || fail "$T: the exact repeat reused $(cached cache r1) tokens of 900"
  # three clients at once, the cache warm for some
  cp=()
  for p in 2 3 4; do
    eval "ask cache b$p \"\$P$p\"" &
    cp+=($!)
  done
  wait "${cp[@]}"
  for p in 2 3 4; do cmp -s "$d/solo.p$p" "$d/cache.b$p" || fail "$T: batched p$p differs"; done
  stop_all
  # the disk tier after a restart: the memory tier is empty
  start cache "$F" --cache-bytes 1G --parallel 4 --cache-dir "$d/disk-${T%%/*}"
  ask cache d2 "$P2"
  cmp -s "$d/solo.p2" "$d/cache.d2" || fail "$T: P2 from the disk tier differs"
  [ "$(grep -o '"cached_tokens_disk":[0-9]*' "$d/cache.d2.raw" | cut -d: -f2)" -gt 0 ] ||
    fail "$T: nothing from the disk tier: $(cat "$d/cache.d2.raw")"
  [ "$(cached cache d2)" -ge $((600 - 64)) ] || fail "$T: P2 from the disk tier reused $(cached cache d2) tokens of 600"
  stop_all
  # speculation: n-grams, and a draft model of the same vocabulary
  if [ "${RW_SANITIZE:-0}" = 1 ]; then
    echo "$T: equal to solo after a hit at 300, 600 and 880 of 900, a repeat, 3 clients, the disk tier"
    continue
  fi
  start ngram "$F" --cache-bytes 1G --parallel 4 --spec ngram --draft-max 4 --draft-fixed
  start draft "$F" --cache-bytes 1G --parallel 4 --draft "$FIX/qwen3/qwen3-Q4_0.gguf" --draft-max 4 --draft-fixed
  for s in ngram draft; do
    ask $s p1 "$P1"
    ask $s p2 "$P2"
    ask $s p3 "$P3"
    for o in p1 p2 p3; do same $s $o; done
  done
  stop_all
  echo "$T: equal to solo after a hit at 300, 600 and 880 of 900, a repeat, 3 clients, the disk tier, n-gram and draft speculation"
done
[ -n "${KEEP:-}" ] && echo "kept $d"
echo "ok"

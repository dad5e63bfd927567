#!/usr/bin/env bash
# rewind serve --draft: speculative decoding through the real server on
# loopback. A server with a draft and one without (same model, the hybrid
# qwen35 fixture: DeltaNet + attention, so the recurrent rollback is
# exercised) answer the same greedy requests with byte-identical bodies
# (tokens, text, logprobs, finish reason; ids and usage aside): alone,
# streaming, with a stop string that ends inside a step's output, with four
# clients at once, and on prefix-cache hits (the same prompt twice, then the
# conversation extended; the draft's state then comes from the cache entry
# too). The model drafting for itself accepts every draft
# (/metrics); a draft with another vocabulary is refused at start. Every
# other fixture architecture as target: bodies equal with three clients at
# once; sampled requests reproduce with their seed.
set -u
REWIND="${REWIND:-build/rewind}"
FIX="${RW_FIXTURES:-../shared/fixtures}"
F="$FIX/qwen35/qwen35-Q8_0.gguf"
D="$FIX/qwen3next/qwen3next-Q8_0.gguf" # a hybrid too: the draft's recurrent state is rewound and cached
[ -f "$F" ] && [ -f "$D" ] || { echo "skipped: no $F"; exit 77; }
command -v curl >/dev/null || { echo "skipped: no curl (scripts/setup.sh installs it)"; exit 77; }
d=$(mktemp -d)
pids=()
fail() { echo "FAIL: $*"; for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; exit 1; }
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; [ -n "${KEEP:-}" ] || rm -rf "$d"' EXIT

. "$(dirname "$0")/serve_lib.sh"
start() { # NAME serve-options... -> port in $d/NAME.port
  local name=$1
  shift
  serve_start "$d/$name.log" "$F" --ctx 512 --kv f32 --threads 1 --parallel 4 "$@"
  pids+=("$serve_pid")
  echo "$serve_port" > "$d/$name.port"
}
# BODY of a completion request to server NAME -> $d/NAME.OUT (ids, times and usage cut)
ask() { # NAME OUT BODY
  curl -s --max-time 120 "http://127.0.0.1:$(cat "$d/$1.port")/v1/completions" -d "$3" > "$d/$1.$2.raw"
  sed 's/"id":"[^"]*"//g; s/"created":[0-9]*//g; s/"usage":{[^}]*}[^}]*}//g' "$d/$1.$2.raw" > "$d/$1.$2"
  grep -q '"token_ids"' "$d/$1.$2" || fail "$1 $2: no tokens: $(head -c 400 "$d/$1.$2.raw")"
}
same() { # OUT: the plain server's and the draft server's bodies are equal
  cmp -s "$d/plain.$1" "$d/spec.$1" ||
    fail "$1 differs with a draft: $(head -c 600 "$d/spec.$1") vs $(head -c 600 "$d/plain.$1")"
}
ids_of() { tr -s ' \n' ' ' < "$FIX/qwen35/qwen35.prompt.ids" | cut -d' ' -f"$1" | sed 's/ *$//; s/ /,/g'; }
req() { # PROMPT_IDS(comma separated) MAX_TOKENS [extra json]
  echo "{\"prompt\":[$1],\"max_tokens\":$2,\"temperature\":0,\"ignore_eos\":true,\"return_token_ids\":true${3:-}}"
}

# another vocabulary: refused at start with the reason
"$REWIND" synth --arch qwen3 --preset qwen3-tiny -o "$d/tiny.gguf" || fail "synth failed"
"$REWIND" serve "$F" --port 0 --draft "$d/tiny.gguf" 2> "$d/bad.log" &
bad=$!
pids+=($bad)
wait $bad
rc=$?
[ $rc -eq 1 ] || fail "a draft with another vocabulary: serve exited $rc: $(cat "$d/bad.log")"
grep -q "same vocabulary" "$d/bad.log" || fail "no clear error: $(cat "$d/bad.log")"

start plain
# --draft-fixed: every step drafts (the adaptive rule would stop a draft
# this poor at once, and the comparison would show little)
start spec --draft "$D" --draft-max 3 --draft-fixed

A=$(ids_of 1-40)
for s in plain spec; do
  ask $s one "$(req "$A" 24 ',"logprobs":3')"
  ask $s stream "$(req "$(ids_of 3-30)" 20 ',"stream":true')"
done
same one
# a stream's chunking depends on timing (tokens of one step may share a
# chunk): compare the concatenated text and ids and the finish reason
for s in plain spec; do
  { grep -o '"text":"[^"]*"' "$d/$s.stream" | sed 's/"text":"//; s/"$//' | tr -d '\n'; echo
    grep -o '"token_ids":\[[0-9,]*\]' "$d/$s.stream" | sed 's/.*\[//; s/\]//' | tr '\n' ','; echo
    grep -o '"finish_reason":"[a-z]*"' "$d/$s.stream"; grep -c '^data: \[DONE\]' "$d/$s.stream"; } > "$d/$s.streamed"
done
same streamed
# a stop string that ends generation in the middle of the output: the text
# of tokens 5-6 of the plain answer
stop=$(sed 's/.*"tokens":\[//; s/\].*//' "$d/plain.one" | awk -F'","' '{print $5}')
if [ -n "$stop" ] && [ "$stop" != '"' ]; then
  for s in plain spec; do ask $s stop "$(req "$A" 24 ",\"stop\":[\"${stop//\"/}\"]")"; done
  same stop
fi

# four clients at once, on each server
for s in plain spec; do
  cp=()
  for i in 1 2 3 4; do
    ask $s c$i "$(req "$(ids_of $((i))-$((10 * i + 5)))" $((8 + 4 * i)) ',"logprobs":1')" &
    cp+=($!)
  done
  wait "${cp[@]}"
done
for i in 1 2 3 4; do same c$i; done

# the prefix cache: the same prompt again (whole prompt restored), then the
# conversation extended by the answer and a new turn
B=$(ids_of 41-110)
for s in plain spec; do
  ask $s b1 "$(req "$B" 12)"
  ask $s b2 "$(req "$B" 12)"
done
same b1
same b2
grep -q '"cached_tokens":70' "$d/spec.b2.raw" || fail "repeat with a draft: not all cached: $(cat "$d/spec.b2.raw")"
# the draft's state came from the cache entry too
curl -s "http://127.0.0.1:$(cat "$d/spec.port")/metrics" > "$d/m"
grep -q '^rewind_spec_draft_cached_tokens_total [1-9]' "$d/m" || fail "no draft state from the cache: $(grep spec "$d/m")"
ans=$(grep -o '"token_ids":\[[0-9,]*\]' "$d/plain.b1" | sed 's/.*\[//; s/\]//')
C="$B,$ans,$(ids_of 111-130)"
for s in plain spec; do ask $s c "$(req "$C" 12 ',"logprobs":2')"; done
same c
grep -q '"cached_tokens":\(8[0-9]\|9[0-9]\)' "$d/spec.c.raw" || fail "extended conversation: $(cat "$d/spec.c.raw")"
curl -s "http://127.0.0.1:$(cat "$d/spec.port")/metrics" > "$d/m"
grep -q '^rewind_spec_drafted_tokens_total [1-9]' "$d/m" || fail "no drafted tokens in /metrics: $(grep spec "$d/m")"
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
wait
pids=()

# every other fixture architecture as target (dense, MoE, other hybrids),
# a dense draft, three clients at once; and a sampled request reproduces
# with its seed and gives the requested count
for T in llama/llama-Q8_0 qwen3/qwen3-Q8_0 qwen35moe/qwen35moe-Q8_0 qwen3next/qwen3next-Q8_0 \
  granitehybrid/granitehybrid-Q8_0 lfm2/lfm2-Q8_0 gemma3/gemma3-Q8_0 gpt-oss/gpt-oss-MXFP4_MOE; do
  F="$FIX/$T.gguf"
  [ -f "$F" ] || continue
  start plain
  start spec --draft "$FIX/qwen3/qwen3-Q4_0.gguf" --draft-max 4 --draft-fixed
  for s in plain spec; do
    cp=()
    for i in 1 2 3; do
      ask $s t$i "$(req "$(ids_of $((3 * i))-$((12 * i + 4)))" $((6 + 3 * i)) ',"logprobs":2')" &
      cp+=($!)
    done
    wait "${cp[@]}"
  done
  for i in 1 2 3; do same t$i || fail "target $T"; done
  for k in 1 2; do
    ask spec r$k "{\"prompt\":[$A],\"max_tokens\":12,\"temperature\":0.9,\"seed\":5,\"ignore_eos\":true,\"return_token_ids\":true}"
  done
  cmp -s "$d/spec.r1" "$d/spec.r2" || fail "$T: a sampled request with a draft does not reproduce with its seed"
  grep -q '"token_ids":\[[0-9]*\(,[0-9]*\)\{11\}\]' "$d/spec.r1" || fail "$T: sampled: $(cat "$d/spec.r1")"
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  wait
  pids=()
done
F="$FIX/qwen35/qwen35-Q8_0.gguf"

# the model drafting for itself: every draft accepted
start self --draft "$F" --draft-max 4 --draft-fixed
ask self s1 "$(req "$A" 17)"
curl -s "http://127.0.0.1:$(cat "$d/self.port")/metrics" > "$d/m"
drafted=$(grep '^rewind_spec_drafted_tokens_total ' "$d/m" | awk '{print $2}')
accepted=$(grep '^rewind_spec_accepted_tokens_total ' "$d/m" | awk '{print $2}')
# 16 tokens after the first, up to 5 a pass: 4 passes, 12 drafts
[ "$drafted" = 12 ] && [ "$accepted" = 12 ] || fail "self-draft: drafted $drafted, accepted $accepted"
grep -q '^rewind_spec_acceptance_rate 1$' "$d/m" || fail "self-draft acceptance: $(grep acceptance "$d/m")"
grep -q '^rewind_spec_tokens_per_verify_pass 4$' "$d/m" || fail "self-draft tokens per pass: $(grep per_verify "$d/m")"
# every draft accepted, so the stop string ends generation inside a step's output
if [ -f "$d/plain.stop" ]; then
  ask self stop "$(req "$A" 24 ",\"stop\":[\"${stop//\"/}\"]")"
  cmp -s "$d/plain.stop" "$d/self.stop" || fail "stop string with a self-draft: $(cat "$d/self.stop") vs $(cat "$d/plain.stop")"
fi
kill -TERM "${pids[0]}"
wait "${pids[0]}" || fail "serve exited $? after SIGTERM"
pids=()
# rewind bench serve --draft: acceptance and tokens per verify pass per level
"$REWIND" bench serve "$F" --clients 1,2 --requests 2 --prompt 8 --gen 6 --threads 1 --json --draft "$F" \
  --draft-fixed > "$d/bench" || fail "bench serve --draft failed: $(cat "$d/bench")"
grep -q '"errors":0' "$d/bench" || fail "bench serve --draft: $(cat "$d/bench")"
[ "$(grep -o '"spec_acceptance":1,"spec_tokens_per_verify_pass":5' "$d/bench" | wc -l)" -eq 2 ] ||
  fail "bench serve --draft with a self-draft: $(cat "$d/bench")"
[ -n "${KEEP:-}" ] && echo "kept $d"
echo "ok"

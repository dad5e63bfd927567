#!/usr/bin/env bash
# The cluster demo (`make demo-cluster`, `scripts/cluster.sh demo [MODEL]`):
# 3 replicas behind nginx (scripts/cluster.sh up), two users with different
# long system prompts, several turns each; each user's turns stay on one
# replica (X-Rewind-Replica, and each replica's /metrics); then the replica
# of the first user is killed and both users go on: the first user's next
# turn is served by another replica, from the shared cache tier when its
# entries are on disk. Prints a table like scripts/demo.sh's: per turn the
# replica, the time to first token measured here (request sent -> first
# streamed token) and cached / prompt tokens (the server's usage), then
# each replica's counters.
#
# RW_DEMO_THREADS: threads per replica (1); RW_DEMO_TOKENS: tokens per answer (8).
# Without MODEL it uses demo.sh's model (Qwen3.5-0.8B shapes, random
# weights, made once by `rewind synth` in build/demo/).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
R="${REWIND:-build/rewind}"
M="${1:-build/demo/qwen35-0.8b-q8_0.gguf}"
MAXTOK="${RW_DEMO_TOKENS:-8}"
if [ ! -f "$M" ]; then
  mkdir -p "$(dirname "$M")"
  echo "demo: synthesizing $M (qwen35-0.8b shapes, random weights, Q8_0)"
  "$R" synth --arch qwen35 --preset qwen35-0.8b --type q8_0 -o "$M" >/dev/null
fi
DIR="$ROOT/build/cluster-demo"
rm -rf "$DIR/cache"
scripts/cluster.sh up --dir "$DIR" --model "$M" -- --ctx 4096 --threads "${RW_DEMO_THREADS:-1}" --parallel 4
trap 'scripts/cluster.sh down --dir "$DIR" >/dev/null' EXIT
. "$DIR/cluster.env"
P=$CLUSTER_PORT
W="$DIR/demo"
rm -rf "$W"; mkdir -p "$W"

handbook() { # USER TOPIC: a long system prompt of its own (~4.5 KB)
  local s="You are $1's personal assistant for $2. $1 relies on you for precise, careful answers."
  for i in $(seq 1 30); do
    s="$s Rule $i for $2: check the $2 record number $((i * 17)) before answering, cite section $i.$((i % 7)), and never guess."
  done
  echo "$s"
}
declare -A SYS MSGS
SYS[alice]=$(handbook Alice "household finances")
SYS[bob]=$(handbook Bob "mountain hiking routes")
for u in alice bob; do MSGS[$u]="{\"role\":\"system\",\"content\":\"${SYS[$u]}\"}"; done

rows=()
turn() { # USER QUESTION NOTE
  local u=$1 q=$2 note=$3
  local f="$W/$u.$((${#rows[@]} + 1))"
  MSGS[$u]="${MSGS[$u]},{\"role\":\"user\",\"content\":\"$q\"}"
  local t0=$EPOCHREALTIME ttft= line
  printf '{"messages":[%s],"max_tokens":%s,"temperature":0,"return_token_ids":true,"stream":true,"stream_options":{"include_usage":true}}' \
    "${MSGS[$u]}" "$MAXTOK" > "$f.req"
  : > "$f.sse"
  while IFS= read -r line || [ -n "$line" ]; do
    if [ -z "$ttft" ] && [[ $line =~ \"token_ids\":\[[0-9] ]]; then ttft=$EPOCHREALTIME; fi
    printf '%s\n' "$line" >> "$f.sse"
  done < <(curl -sN --max-time 600 -D "$f.h" "http://127.0.0.1:$P/v1/chat/completions" -d @"$f.req")
  local rep text prompt cached disk ms
  rep=$(tr -d '\r' < "$f.h" | sed -n 's/^X-Rewind-Replica: //Ip')
  if ! grep -q '"prompt_tokens"' "$f.sse"; then # an error: say it, go on
    rows+=("$(printf '%-6s %-8s  error: %s' "$u" "${rep:-?}" "$(head -1 "$f.h" | tr -d '\r')")")
    LAST_REPLICA=$rep
    return 0
  fi
  prompt=$(grep -o '"prompt_tokens":[0-9]*' "$f.sse" | tail -1 | sed 's/.*://')
  cached=$(grep -o '"cached_tokens":[0-9]*' "$f.sse" | tail -1 | sed 's/.*://')
  disk=$(grep -o '"cached_tokens_disk":[0-9]*' "$f.sse" | tail -1 | sed 's/.*://')
  # the answer's text: the content pieces of the stream, kept JSON-escaped
  # the answer goes back as history, without U+0000 (the server refuses it in JSON input)
  text=$(grep -o '"content":"\([^"\\]\|\\.\)*"' "$f.sse" | sed 's/^"content":"//; s/"$//; s/\\u0000//g' | tr -d '\n')
  MSGS[$u]="${MSGS[$u]},{\"role\":\"assistant\",\"content\":\"$text\"}"
  ms=$(awk -v a="$t0" -v b="${ttft:-$EPOCHREALTIME}" 'BEGIN { printf "%.0f", (b - a) * 1000 }')
  rows+=("$(printf '%-6s %-8s %7s ms %6s / %-6s %6s   %s' "$u" "${rep:-?}" "$ms" "${cached:-?}" "${prompt:-?}" "${disk:-0}" "$note")")
  LAST_REPLICA=$rep
}

echo "demo: two users, their own long system prompts, through nginx on port $P"
turn alice "What did I spend on groceries last month?" "cold: Alice's handbook is computed"
alice_r=$LAST_REPLICA
turn bob "Which route to the summit is safest in October?" "cold: Bob's handbook"
bob_r=$LAST_REPLICA
turn alice "And on electricity?" "same replica: the conversation is cached"
turn bob "How long does it take?" "same replica"
turn alice "Compare both with last year." "same replica"
turn bob "What should I pack?" "same replica"
i=${alice_r#r}
vpid=$(echo $REPLICA_PIDS | cut -d' ' -f"$i")
echo "demo: killing replica $alice_r (Alice's), pid $vpid"
# its entries reach the shared folder about a second after each request
# (write-through): give them that second, as a crash a while after the
# last answer would
sleep 1.5
n_disk=$(ls "$DIR/cache" | grep -c '\.rwc$' || true)
kill -KILL "$vpid"
turn alice "Where can I save money?" "$alice_r is gone: another replica, prefix from the shared tier"
if [ "$bob_r" = "$alice_r" ]; then
  turn bob "Any water on the way?" "Bob shared $alice_r (their keys hash there): moved too, from the shared tier"
else
  turn bob "Any water on the way?" "Bob's replica $bob_r is alive: unchanged"
fi
turn alice "Thanks, summarise." "stays on the new replica"

echo
printf '%-6s %-8s %10s %15s %8s   %s\n' user replica TTFT "cached/prompt" "of which disk" ""
for r in "${rows[@]}"; do echo "$r"; done
echo
echo "per replica (its /metrics): finished requests, prompt tokens cached from memory / from disk, recomputed"
j=0
for port in $REPLICA_PORTS; do
  j=$((j + 1))
  if m=$(curl -s --max-time 5 "http://127.0.0.1:$port/metrics"); then
    printf 'r%s  %4s requests  %6s memory  %6s disk  %6s recomputed\n' "$j" \
      "$(sed -n 's/^rewind_requests_finished_total //p' <<< "$m")" \
      "$(sed -n 's/^rewind_prompt_tokens_cached_total{tier="memory"} //p' <<< "$m")" \
      "$(sed -n 's/^rewind_prompt_tokens_cached_total{tier="disk"} //p' <<< "$m")" \
      "$(sed -n 's/^rewind_prompt_tokens_recomputed_total //p' <<< "$m")"
  else
    echo "r$j  (killed)"
  fi
done
echo "shared cache tier $DIR/cache: $n_disk state files when $alice_r was killed"
echo "== cluster demo finished"

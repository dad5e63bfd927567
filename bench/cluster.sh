#!/usr/bin/env bash
# Replicas behind nginx vs one server: C concurrent
# conversations (12) of T turns (4), each with its own long system prompt,
# played through (a) one `rewind serve` holding every conversation and (b) N
# replicas (3) behind nginx (scripts/cluster.sh, prefix-key routing). Prints
# per turn, for both: the cached share of prompt tokens (sum of usage's
# cached_tokens / sum of prompt_tokens) and the time to first token (mean and
# max over the conversations, measured here: request sent -> first streamed
# token). Streaming, greedy, MAX_TOKENS (8) per answer.
#
#   bench/cluster.sh [MODEL.gguf]     env: C, T, N, MAX_TOKENS, THREADS (per server, 1)
#
# Without MODEL: Qwen3.5-0.8B's shapes cut to 4 layers, random weights, Q8_0
# (rewind synth, made once in build/bench/). Both setups run on this machine:
# the replicas share its cores, so TTFT compares routing and caching, not
# more hardware.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
R="${REWIND:-build/rewind}"
M="${1:-build/bench/qwen35-0.8b-4l-q8_0.gguf}"
C=${C:-12} T=${T:-4} N=${N:-3} MAXTOK=${MAX_TOKENS:-8} THREADS=${THREADS:-1}
if [ ! -f "$M" ]; then
  mkdir -p "$(dirname "$M")"
  echo "bench cluster: synthesizing $M (qwen35-0.8b shapes, 4 layers, random weights, Q8_0)"
  "$R" synth --arch qwen35 --preset qwen35-0.8b --layers 4 --type q8_0 -o "$M" >/dev/null
fi
W=$(mktemp -d)
[ -n "${KEEP:-}" ] && echo "bench cluster: work folder $W (kept)"
spid=
trap '[ -n "$spid" ] && kill "$spid" 2>/dev/null; scripts/cluster.sh down --dir "$W/cl" >/dev/null 2>&1; [ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT
trap 'exit 1' TERM INT
OPTS=(--ctx 4096 --threads "$THREADS" --parallel "$C")

sys_of() { # conversation C's system prompt (~3 KB)
  local s="You are the assistant of customer $1. Follow the account rules."
  for i in $(seq 1 20); do s="$s Rule $i for customer $1: check ledger $(($1 * 100 + i)) and quote clause $i.$(($1 % 9))."; done
  echo "$s"
}
# one conversation, T turns, through PORT; lines "turn ttft_s cached prompt" to OUT
conversation() { # PORT C OUT
  local port=$1 c=$2 out=$3 msgs line t0 ttft text
  msgs="{\"role\":\"system\",\"content\":\"$(sys_of "$c")\"}"
  for t in $(seq 1 "$T"); do
    msgs="$msgs,{\"role\":\"user\",\"content\":\"Question $t of customer $c: what is my balance?\"}"
    printf '{"messages":[%s],"max_tokens":%s,"temperature":0,"return_token_ids":true,"stream":true,"stream_options":{"include_usage":true}}' \
      "$msgs" "$MAXTOK" > "$out.req"
    : > "$out.sse"
    t0=$EPOCHREALTIME ttft=
    while IFS= read -r line || [ -n "$line" ]; do
      if [ -z "$ttft" ] && [[ $line =~ \"token_ids\":\[[0-9] ]]; then ttft=$EPOCHREALTIME; fi
      printf '%s\n' "$line" >> "$out.sse"
    done < <(curl -sN --max-time 900 "http://127.0.0.1:$port/v1/chat/completions" -d @"$out.req")
    grep -q '"token_ids"' "$out.sse" || { echo "bench cluster: conversation $c turn $t failed: $(head -c 500 "$out.sse")" >&2; return 1; }
    # the answer goes back as history, without U+0000 (the server refuses it in JSON input)
    text=$(grep -o '"content":"\([^"\\]\|\\.\)*"' "$out.sse" | sed 's/^"content":"//; s/"$//; s/\\u0000//g' | tr -d '\n')
    msgs="$msgs,{\"role\":\"assistant\",\"content\":\"$text\"}"
    echo "$t $(awk -v a="$t0" -v b="${ttft:-$EPOCHREALTIME}" 'BEGIN { printf "%.4f", b - a }') \
$(grep -o '"cached_tokens":[0-9]*' "$out.sse" | tail -1 | sed 's/.*://') \
$(grep -o '"prompt_tokens":[0-9]*' "$out.sse" | tail -1 | sed 's/.*://')" >> "$out"
  done
}
play() { # PORT TAG: all conversations at once
  local pids=""
  for c in $(seq 1 "$C"); do conversation "$1" "$c" "$W/$2.$c" & pids="$pids $!"; done
  for p in $pids; do wait "$p"; done
  cat "$W/$2".[0-9]* | grep -v '^$' > "$W/$2.all"
}
summary() { # TAG -> per turn: share ttft_mean ttft_max
  awk '{ n[$1]++; s[$1] += $2; if ($2 > mx[$1]) mx[$1] = $2; ca[$1] += $3; pr[$1] += $4 }
       END { for (t = 1; t in n; t++) printf "%d %.3f %.1f %.1f %d\n", t, pr[t] ? ca[t] / pr[t] : 0, 1000 * s[t] / n[t], 1000 * mx[t], n[t] }' "$W/$1.all"
}

echo "bench cluster: $C conversations x $T turns, $MAXTOK tokens per answer, model $M, $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'))"
"$R" serve "$M" --port 0 "${OPTS[@]}" 2> "$W/one.log" &
spid=$!
port=
for _ in $(seq 1 600); do
  port=$(grep -ao 'listening on http://127.0.0.1:[0-9]*' "$W/one.log" | sed 's/.*://' || true)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$W/one.log" >&2; exit 1; }
s0=$EPOCHREALTIME
play "$port" one
s1=$EPOCHREALTIME
kill -TERM "$spid"; wait "$spid" || true; spid=
RW_NO_INSTALL=${RW_NO_INSTALL:-0} scripts/cluster.sh up --dir "$W/cl" --replicas "$N" --model "$M" -- "${OPTS[@]}" >/dev/null
. "$W/cl/cluster.env"
s2=$EPOCHREALTIME
play "$CLUSTER_PORT" cl
s3=$EPOCHREALTIME
echo "per replica, requests: $(for p in $REPLICA_PORTS; do curl -s "http://127.0.0.1:$p/metrics" | sed -n 's/^rewind_requests_finished_total //p'; done | tr '\n' ' ')"
summary one > "$W/one.sum"
summary cl > "$W/cl.sum"
printf '%-5s | %-28s | %-28s\n' "" "1 server" "$N replicas + nginx"
printf '%-5s | %7s %9s %9s | %7s %9s %9s\n' turn cached "TTFT avg" "TTFT max" cached "TTFT avg" "TTFT max"
paste -d' ' "$W/one.sum" "$W/cl.sum" |
  awk '{ printf "%-5s | %6.1f%% %7.0fms %7.0fms | %6.1f%% %7.0fms %7.0fms\n", $1, 100 * $2, $3, $4, 100 * $7, $8, $9 }'
awk -v a="$s0" -v b="$s1" -v c="$s2" -v d="$s3" 'BEGIN { printf "wall: 1 server %.1f s, %s replicas %.1f s\n", b - a, '"$N"', d - c }'

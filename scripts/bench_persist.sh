#!/usr/bin/env bash
# bench_persist.sh MODEL [REPS] - what write-through to the disk tier costs
# a decoding stream (target: < 3%). For each rep, two servers in turn
# (interleaved, so machine load falls on both alike): without a disk tier,
# and with --cache-dir (write-through, the default). In each, one stream
# decodes 192 tokens while eight other requests with distinct 400-token
# prompts come and go (one token each), so the disk tier writes their
# entries (tens of MB each on a Qwen3.5-0.8B-shaped model) while the stream
# decodes. Prints the stream's mean inter-token latency per run (from
# /metrics: rewind_inter_token_latency_seconds; the short requests make no
# inter-token samples), the disk writes made, and the ratio of the medians.
set -u
M="${1:?usage: scripts/bench_persist.sh MODEL [REPS]}"
REPS="${2:-3}"
R="${REWIND:-build/rewind}"
THREADS="${THREADS:-2}"
d=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$d"' EXIT
start() { # extra options
  "$R" serve "$M" --port 0 --ctx 2048 --threads "$THREADS" --parallel 4 --cache-bytes 8G "$@" 2> "$d/log" &
  pid=$!
  port=
  for _ in $(seq 1 600); do
    port=$(grep -ao 'listening on http://127.0.0.1:[0-9]*' "$d/log" 2>/dev/null | sed 's/.*://')
    [ -n "$port" ] && return 0
    sleep 0.1
  done
  echo "server did not start: $(cat "$d/log")"; exit 1
}
ids() { # N SEED: N token ids
  awk -v n="$1" -v s="$2" 'BEGIN { srand(s); for (i = 0; i < n; i++) printf "%s%d", (i ? "," : ""), 1 + int(rand() * 400) }'
}
post() { curl -s --max-time 600 "http://127.0.0.1:$port/v1/completions" -d "$1" > /dev/null; }
run() { # LABEL REP extra options -> prints the mean ITL in ms
  local label=$1 rep=$2
  shift 2
  rm -rf "$d/cache"
  start "$@"
  post "{\"prompt\":[$(ids 64 9)],\"max_tokens\":4,\"temperature\":0}" # warm-up
  post "{\"prompt\":[$(ids 32 $((rep * 100)))],\"max_tokens\":192,\"temperature\":0,\"ignore_eos\":true}" &
  local victim=$!
  for k in $(seq 1 8); do
    post "{\"prompt\":[$(ids 400 $((rep * 100 + k)))],\"max_tokens\":1,\"temperature\":0}"
    sleep 0.3
  done
  wait "$victim"
  local m=$(curl -s "http://127.0.0.1:$port/metrics")
  local sum=$(echo "$m" | grep '^rewind_inter_token_latency_seconds_sum' | sed 's/.* //')
  local cnt=$(echo "$m" | grep '^rewind_inter_token_latency_seconds_count' | sed 's/.* //')
  local wr=$(echo "$m" | grep '^rewind_prefix_cache_disk_writes_total' | sed 's/.* //')
  local by=$(echo "$m" | grep 'rewind_cache_bytes{kind="disk"}' | sed 's/.* //')
  kill -TERM "$pid"; wait "$pid"; pid=
  local itl=$(awk -v s="$sum" -v c="$cnt" 'BEGIN { printf "%.3f", 1000 * s / c }')
  echo "$label rep $rep: mean inter-token latency $itl ms over $cnt gaps; disk writes ${wr:-0}, $(( ${by:-0} >> 20 )) MiB on disk" >&2
  echo "$itl"
}
: > "$d/none"; : > "$d/through"
for rep in $(seq 1 "$REPS"); do
  run none "$rep" >> "$d/none"
  run through "$rep" --cache-dir "$d/cache" >> "$d/through"
done
med() { sort -n "$1" | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }
a=$(med "$d/none"); b=$(med "$d/through")
echo "median mean ITL: no disk tier $a ms, write-through $b ms: $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%+.1f%%", 100 * (b / a - 1) }')"
echo "(runs: none $(tr '\n' ' ' < "$d/none")| through $(tr '\n' ' ' < "$d/through"))"

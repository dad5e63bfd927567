#!/usr/bin/env bash
# scripts/grammar_neighbour.sh - how much a worst-case schema slows an
# unrelated request beside it (docs/server-security.md).
#
#   scripts/grammar_neighbour.sh [MODEL.gguf] [--rounds R] [--threads T] [--gbnf FILE]
#
# One `rewind serve` (--parallel 4) over MODEL (default: the synthesized
# Qwen3.5-0.8B Q8_0 of build/bench, made once with rewind synth). A
# neighbour (a 16-token greedy chat) is timed in three settings, interleaved
# R times so that the machine's drift hits each alike:
#   alone     nothing else runs;
#   plain     two unconstrained 64-token requests run beside it;
#   schema    two requests run beside it with the widest schemas the server
#             admits (an object of 5,000 required properties; a pattern-heavy
#             object), sampled, 64 tokens each; with --gbnf, two requests
#             under that GBNF grammar instead (it must be admitted).
# "plain" and "schema" put the same number of sequences in each step, so
# schema/plain is what the grammar work costs the neighbour (compile and
# admission on the HTTP workers, masks on the scheduler). Prints the median
# and range of each setting and the two ratios.
set -u
cd "$(dirname "$0")/.."
M= rounds=5 threads=2 gbnf=
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --gbnf) gbnf=$2; shift 2 ;;
    -*) echo "usage: scripts/grammar_neighbour.sh [MODEL.gguf] [--rounds R] [--threads T] [--gbnf FILE]" >&2; exit 2 ;;
    *) M=$1; shift ;;
  esac
done
bin=build/rewind
[ -x $bin ] || { echo "build first: make" >&2; exit 1; }
if [ -z "$M" ]; then
  M=build/bench/qwen35-0.8b-q8_0.gguf
  mkdir -p build/bench
  [ -f "$M" ] || $bin synth --arch qwen35 --preset qwen35-0.8b --type q8_0 --seed 1 -o "$M" >&2 || exit 1
fi
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; jobs -p | xargs -r kill 2>/dev/null; rm -rf "$tmp"' EXIT
$bin serve "$M" --port 0 --parallel 4 --threads "$threads" --ctx 4096 2> "$tmp/log" &
pid=$!
port=
for _ in $(seq 1 600); do
  port=$(grep -ao 'listening on http://127.0.0.1:[0-9]*' "$tmp/log" 2>/dev/null | sed 's/.*://')
  [ -n "$port" ] && break
  kill -0 $pid 2>/dev/null || { cat "$tmp/log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "the server did not start" >&2; exit 1; }
url=http://127.0.0.1:$port/v1/chat/completions

# the neighbour and the two kinds of company
printf '{"messages":[{"role":"user","content":"Say something about rivers."}],"max_tokens":16,"temperature":0,"ignore_eos":true}' \
  > "$tmp/neighbour.json"
printf '{"messages":[{"role":"user","content":"Write a long list."}],"max_tokens":64,"temperature":1,"ignore_eos":true}' \
  > "$tmp/plain.json"
{ printf '{"messages":[{"role":"user","content":"Fill the form."}],"max_tokens":64,"temperature":1,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{'
  awk 'BEGIN { for (i = 0; i < 5000; i++) printf "%s\"p%d\":{\"type\":\"string\"}", i ? "," : "", i }'
  printf '},"required":['
  awk 'BEGIN { for (i = 0; i < 5000; i++) printf "%s\"p%d\"", i ? "," : "", i }'
  printf ']}}}}'; } > "$tmp/schema1.json"
{ printf '{"messages":[{"role":"user","content":"Fill the form."}],"max_tokens":64,"temperature":1,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{'
  awk 'BEGIN { for (i = 0; i < 200; i++) printf "%s\"f%d\":{\"type\":\"string\",\"pattern\":\"^[a-z]{2,8}-[0-9]{1,4}(\\\\.[a-z]+)?$\"},\"n%d\":{\"type\":\"number\",\"minimum\":-5.5,\"maximum\":1000}", i ? "," : "", i, i }'
  printf '},"required":['
  awk 'BEGIN { for (i = 0; i < 200; i++) printf "%s\"f%d\",\"n%d\"", i ? "," : "", i, i }'
  printf ']}}}}'; } > "$tmp/schema2.json"
if [ -n "$gbnf" ]; then # the same grammar for both
  python3 -c 'import json, sys; print(json.dumps({"messages": [{"role": "user", "content": "Fill the form."}], "max_tokens": 64, "temperature": 1, "grammar": open(sys.argv[1]).read()}))' \
    "$gbnf" > "$tmp/schema1.json" || exit 1
  cp "$tmp/schema1.json" "$tmp/schema2.json"
fi

post() { curl -s -o "$tmp/out.$$.$RANDOM" -w '%{http_code} %{time_total}\n' --max-time 300 "$url" \
  -H 'Content-Type: application/json' -d @"$1"; }
# company KIND: two requests of that kind, resubmitted until told to stop
company_pids=()
company() {
  local kind=$1 i
  company_pids=()
  for i in 1 2; do
    ( f="$tmp/$kind.json"; [ "$kind" = schema ] && f="$tmp/schema$i.json"
      while [ ! -f "$tmp/stop" ]; do
        r=$(post "$f"); case $r in 200*) ;; *) echo "company $kind: $r" >> "$tmp/errors" ;; esac
      done ) &
    company_pids+=($!)
  done
}
time_neighbour() { post "$tmp/neighbour.json" | awk '$1 == 200 { print $2 } $1 != 200 { print "ERR " $0 }'; }

post "$tmp/neighbour.json" > /dev/null # warm: the weights paged in
for r in $(seq 1 "$rounds"); do
  for kind in alone plain schema; do
    rm -f "$tmp/stop"
    if [ $kind != alone ]; then company $kind; sleep 2; fi # the company admitted and decoding
    for k in 1 2; do time_neighbour >> "$tmp/$kind.t"; done
    touch "$tmp/stop"
    [ ${#company_pids[@]} -gt 0 ] && wait "${company_pids[@]}" 2>/dev/null
    company_pids=()
  done
  echo "round $r/$rounds done" >&2
done
kill -TERM $pid; wait $pid 2>/dev/null; pid=
if grep -q ERR "$tmp"/*.t || [ -s "$tmp/errors" ]; then
  echo "requests failed:"; grep -h ERR "$tmp"/*.t; cat "$tmp/errors" 2>/dev/null; exit 1
fi
echo "neighbour latency, 16 tokens, $(basename "$M"), --threads $threads, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
for kind in alone plain schema; do
  sort -n "$tmp/$kind.t" | awk -v k=$kind '{ v[NR] = $1 } END { printf "  %-7s median %.3f s  range %.3f-%.3f s  (%d runs)\n", k, v[int((NR + 1) / 2)], v[1], v[NR], NR }'
done
med() { sort -n "$tmp/$1.t" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
awk -v a="$(med alone)" -v p="$(med plain)" -v s="$(med schema)" \
  'BEGIN { printf "  schema/plain %.2f (what the grammar work costs the neighbour)\n  schema/alone %.2f\n", s / p, s / a }'

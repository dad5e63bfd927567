#!/usr/bin/env bash
# serve_rss_vs_llama.sh - peak memory of `rewind serve` and llama-server on
# the same file, context and request, side by side, as one markdown table.
#
#   LLAMA_SERVER=../shared/tools/llama.cpp/llama-server scripts/serve_rss_vs_llama.sh FILE.gguf...
#
# Each server starts on FILE with CTX positions of context, THREADS threads
# and one slot, answers one /v1/completions request (a prompt of about
# PROMPT tokens of English text, GEN tokens out, greedy), and its peak RSS
# (VmHWM from /proc) is read after the answer, then the server is stopped.
# The engines run one after the other, ROUNDS times, so both see the same
# machine. llama-server is a measuring instrument only: nothing else uses it.
#
# Environment (defaults): LLAMA_SERVER (required), REWIND build/rewind,
#   CTX 4096, THREADS 2, PROMPT 512, GEN 16, ROUNDS 1, PORT 18431
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_SERVER=${LLAMA_SERVER:-}
REWIND=${REWIND:-build/rewind}
CTX=${CTX:-4096}
THREADS=${THREADS:-2}
PROMPT=${PROMPT:-512}
GEN=${GEN:-16}
ROUNDS=${ROUNDS:-1}
PORT=${PORT:-18431}

if [[ -z "$LLAMA_SERVER" || ! -x "$LLAMA_SERVER" ]]; then
    echo "serve_rss_vs_llama.sh: set LLAMA_SERVER to a llama-server binary (e.g. ../shared/tools/llama.cpp/llama-server)" >&2
    exit 2
fi
[[ -x "$REWIND" ]] || { echo "serve_rss_vs_llama.sh: $REWIND is not built (make)" >&2; exit 2; }
[[ $# -ge 1 ]] || { echo "usage: $0 FILE.gguf..." >&2; exit 2; }
command -v curl >/dev/null || { echo "serve_rss_vs_llama.sh: needs curl" >&2; exit 2; }

# about PROMPT tokens: English words are about one token each
words="the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches near old river"
prompt=""
for ((i = 0; i < PROMPT / 18 + 1; i++)); do prompt+="$words "; done
body=$(printf '{"prompt":"%s","max_tokens":%d,"temperature":0}' "$prompt" "$GEN")

pid=""
trap '[[ -n "$pid" ]] && kill "$pid" 2>/dev/null; true' EXIT

# runs one server (command line in "$@"), prints "peak_MiB prompt_tokens"
measure() {
    local log
    log=$(mktemp)
    "$@" >"$log" 2>&1 &
    pid=$!
    local ok=""
    for ((t = 0; t < 600; t++)); do
        if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then ok=1; break; fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 1
    done
    if [[ -z "$ok" ]]; then
        echo "serve_rss_vs_llama.sh: server did not come up: $*" >&2
        tail -5 "$log" >&2
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        pid=""
        rm -f "$log"
        return 1
    fi
    local out
    # not -f: llama-server may answer 500 after the work is done when its
    # output parser rejects a random model's text; the memory is what counts
    out=$(curl -s -H 'Content-Type: application/json' -d "$body" "http://127.0.0.1:$PORT/v1/completions" || true)
    local ptok
    ptok=$(sed -n 's/.*"prompt_tokens":\([0-9]*\).*/\1/p' <<<"$out")
    [[ -n "$ptok" ]] || ptok=$(sed -n 's/.*prompt processing, n_tokens = *\([0-9]*\).*/\1/p' "$log" | tail -1)
    local hwm
    sleep 1 # the state pool fills its ready slab once requests pause (docs/performance.md)
    hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    pid=""
    rm -f "$log"
    awk -v k="$hwm" -v p="${ptok:-?}" 'BEGIN { printf "%.1f %s\n", k / 1024, p }'
}

echo "| file | context | prompt tokens (rewind / llama) | peak RSS rewind (MiB) | peak RSS llama-server (MiB) | ratio |"
echo "|---|---:|---:|---:|---:|---:|"
for f in "$@"; do
    for ((r = 0; r < ROUNDS; r++)); do
        read -r rw rwp < <(measure "$REWIND" serve "$f" --ctx "$CTX" --threads "$THREADS" --parallel 1 --port "$PORT")
        read -r ll llp < <(measure "$LLAMA_SERVER" -m "$f" -c "$CTX" -t "$THREADS" -np 1 --port "$PORT")
        awk -v f="$(basename "$f")" -v c="$CTX" -v a="$rw" -v b="$ll" -v ap="$rwp" -v bp="$llp" \
            'BEGIN { printf "| %s | %d | %s / %s | %.1f | %.1f | %.3f |\n", f, c, ap, bp, a, b, a / b }'
    done
done

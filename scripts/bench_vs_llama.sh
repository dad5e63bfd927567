#!/usr/bin/env bash
# bench_vs_llama.sh - rewind and llama.cpp side by side on the same files,
# the same machine and in the same run, printed as one markdown table.
#
#   LLAMA_BENCH=../shared/tools/llama.cpp/llama-bench scripts/bench_vs_llama.sh
#   make bench-compare LLAMA_BENCH=...
#   LLAMA_BENCH=path/to/an/avx2/build/llama-bench RW_KERNELS=avx2 GRID=qwen35-0.8b:q8_0 \
#       scripts/bench_vs_llama.sh     # both engines on AVX2 (docs/performance.md)
#
# For every model of the grid it synthesizes the file once (`rewind synth`,
# cached under build/bench/; an entry PRESET:TYPE:N keeps the first N layers
# of the trunk, for models whose whole file would not fit), then runs `rewind bench model` and llama-bench
# in turn, ROUNDS times, interleaved (rewind, llama, rewind, llama, ...), so
# that a load that comes and goes on a shared machine hits both alike. Each
# engine's prefill (ppPROMPT) and decode (tgGEN) are reported as the range
# over the rounds (each round: the mean of REPS repetitions), with the ratio
# of the medians; peak RSS is the most over the rounds (/usr/bin/time %M).
# llama-bench is a measuring instrument only: nothing else uses it.
#
# Environment (defaults):
#   LLAMA_BENCH  path to llama-bench (required): the instrument, e.g. a build
#                with AVX-512 off to compare the AVX2 tier
#   RW_KERNELS   rewind's kernel tier (ref, avx2, avx512, amx, neon; unset: the
#                best this CPU runs), named in the table's header
#   REWIND       build/rewind
#   GRID         "qwen35-0.8b:q8_0 qwen35-0.8b:q4_k_m qwen35-4b:q4_k_m qwen35-4b:q8_0 qwen35-9b:q4_k_m qwen3-4b:q4_k_m",
#                entries PRESET:TYPE or PRESET:TYPE:LAYERS; or a named set:
#                  archs  the sliding-window and hybrid models (gemma-3-4b,
#                         gemma-3-12b, gpt-oss-20b with MXFP4 experts,
#                         Nemotron Nano 9B v2, LFM2-1.2B, LFM2-2.6B), layers
#                         cut to fit 24 GiB
#                  moe    Qwen3.5-35B-A3B, Qwen3-Next-80B-A3B, Granite-4.0-H-Tiny
#                  all    the default grid, then archs, then moe (the README's table)
#                A row whose file rewind cannot load shows "load error" in
#                its rewind columns (llama.cpp's are still measured); one
#                llama-bench cannot run shows "error".
#   VOCAB        ../shared/fixtures/tokenizer/ggml-vocab-qwen3.gguf if present: the
#                files get the Qwen3 vocabulary (151,936 rows of embedding and
#                output head, as real models), not synth's 407-token one
#   THREADS 2, PROMPT 512, GEN 64, REPS 3, ROUNDS 2, DEPTH 0 (llama-bench -d / bench model --depth)
#   NUMERICS     auto (rewind's default, our summation order for every type);
#                ggml sums as llama.cpp does (its logits bit for bit, about
#                half the K-quant prefill speed: docs/numerics.md)
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_BENCH=${LLAMA_BENCH:-}
REWIND=${REWIND:-build/rewind}
GRID_MAIN="qwen35-0.8b:q8_0 qwen35-0.8b:q4_k_m qwen35-4b:q4_k_m qwen35-4b:q8_0 qwen35-9b:q4_k_m qwen3-4b:q4_k_m"
GRID_ARCHS="gemma-3-4b:q4_k_m gemma-3-12b:q4_k_m gpt-oss-20b:mxfp4_moe:4 nemotron-nano-9b-v2:q4_k_m:16 lfm2-1.2b:q4_k_m lfm2-2.6b:q4_k_m"
GRID_MOE="qwen35-35b-a3b:q4_k_m:8 qwen3-next-80b-a3b:q4_k_m:4 granite-4.0-h-tiny:q4_k_m:10"
GRID=${GRID:-$GRID_MAIN}
case "$GRID" in
archs) GRID=$GRID_ARCHS ;;
moe) GRID=$GRID_MOE ;;
all) GRID="$GRID_MAIN $GRID_ARCHS $GRID_MOE" ;;
esac
THREADS=${THREADS:-2}
PROMPT=${PROMPT:-512}
GEN=${GEN:-64}
REPS=${REPS:-3}
ROUNDS=${ROUNDS:-2}
DEPTH=${DEPTH:-0}
NUMERICS=${NUMERICS:-auto}
RW_KERNELS=${RW_KERNELS:-}
if [[ -n "$RW_KERNELS" ]]; then export RW_KERNELS; fi
CACHE=build/bench
VOCAB=${VOCAB-../shared/fixtures/tokenizer/ggml-vocab-qwen3.gguf}
vocab_flag=(); vtag=""
if [[ -n "$VOCAB" && -f "$VOCAB" ]]; then vocab_flag=(--vocab "$VOCAB"); vtag="-$(basename "$VOCAB" .gguf)"; fi

if [[ -z "$LLAMA_BENCH" || ! -x "$LLAMA_BENCH" ]]; then
    echo "bench_vs_llama.sh: set LLAMA_BENCH to a llama-bench binary (e.g. ../shared/tools/llama.cpp/llama-bench)" >&2
    exit 2
fi
[[ -x "$REWIND" ]] || { echo "bench_vs_llama.sh: $REWIND is not built (make)" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "bench_vs_llama.sh: needs /usr/bin/time (Debian package time)" >&2; exit 2; }
mkdir -p "$CACHE"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the value of a numeric field of rewind's one-line JSON, and of a string one
jfield() { sed -n "s/.*\"$2\":\([-0-9.eE+]*\).*/\1/p" "$1"; }
jstr() { sed -n "s/.*\"$2\":\"\([^\"]*\)\".*/\1/p" "$1"; }
# a column of llama-bench's CSV (header line, then one line per test), for
# the test whose n_prompt / n_gen match
csvfield() { # file column n_prompt n_gen
    awk -F, -v col="$2" -v np="$3" -v ng="$4" '
        NR == 1 { for (i = 1; i <= NF; i++) { gsub(/"/, "", $i); h[$i] = i }; next }
        { gsub(/"/, ""); if ($h["n_prompt"] == np && $h["n_gen"] == ng) print $h[col] }' "$1"
}
# min-max of the numbers given, "a-b" (one decimal), and the median
range() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "%.1f-%.1f", v[1], v[NR] }'; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m }'; }
maxof() { printf '%s\n' "$@" | sort -g | tail -1; }

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
llver="" # the instrument's build (llama-bench's CSV: build_number, build_commit), from its first run
load0=$(cut -d' ' -f1-3 /proc/loadavg)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git diff --quiet 2>/dev/null || echo "+changes")
at=""; dflag_r=(); dflag_l=()
if [[ "$DEPTH" -gt 0 ]]; then at=" @ d$DEPTH"; dflag_r=(--depth "$DEPTH"); dflag_l=(-d "$DEPTH"); fi

rows=()
for entry in $GRID; do
    IFS=: read -r preset type layers <<< "$entry"
    layers_flag=(); ltag=""; label=$preset
    if [[ -n "$layers" ]]; then layers_flag=(--layers "$layers"); ltag="-L$layers"; label="$preset ($layers layers)"; fi
    f="$CACHE/$preset-$type$ltag$vtag.gguf"
    if [[ ! -f "$f" ]]; then
        echo "synthesizing $f ..." >&2
        "$REWIND" synth --preset "$preset" --type "$type" "${layers_flag[@]}" "${vocab_flag[@]}" -o "$f" >&2
    fi
    rw_pp=() rw_tg=() rw_rss=() ll_pp=() ll_tg=() ll_rss=() kern="" rw_ok=1 ll_ok=1
    for ((r = 1; r <= ROUNDS; r++)); do
        echo "$preset $type: round $r/$ROUNDS" >&2
        if [[ $rw_ok == 1 ]] && /usr/bin/time -f %M -o "$tmp/rss" "$REWIND" bench model "$f" --prompt "$PROMPT" \
            --gen "$GEN" --threads "$THREADS" --reps "$REPS" --numerics "$NUMERICS" "${dflag_r[@]}" --json > "$tmp/rw.json" \
            2> "$tmp/rw.err"; then
            rw_pp+=("$(jfield "$tmp/rw.json" prefill_tok_s)")
            rw_tg+=("$(jfield "$tmp/rw.json" decode_tok_s)")
            rw_rss+=("$(tail -1 "$tmp/rss")")
            kern=$(jstr "$tmp/rw.json" kernels)
        else
            [[ $rw_ok == 0 ]] || { echo "rewind cannot run $f: $(tail -1 "$tmp/rw.err")" >&2; rw_ok=0; }
        fi
        if ! /usr/bin/time -f %M -o "$tmp/rss" "$LLAMA_BENCH" -m "$f" -t "$THREADS" -p "$PROMPT" -n "$GEN" \
            -r "$REPS" "${dflag_l[@]}" -o csv > "$tmp/ll.csv" 2> "$tmp/ll.err"; then
            echo "llama-bench cannot run $f: $(grep -m1 -i 'error\|assert' "$tmp/ll.err")" >&2
            ll_ok=0
            break
        fi
        [[ -n "$llver" ]] || llver="b$(csvfield "$tmp/ll.csv" build_number "$PROMPT" 0) ($(csvfield "$tmp/ll.csv" build_commit "$PROMPT" 0))"
        ll_pp+=("$(csvfield "$tmp/ll.csv" avg_ts "$PROMPT" 0)")
        ll_tg+=("$(csvfield "$tmp/ll.csv" avg_ts 0 "$GEN")")
        ll_rss+=("$(tail -1 "$tmp/rss")")
    done
    if [[ $ll_ok == 0 ]]; then
        rows+=("| $label | $type | - | - | error | - | - | error | - | - | - |")
        continue
    fi
    lr=$(maxof "${ll_rss[@]}")
    if [[ $rw_ok == 1 ]]; then
        pr=$(awk -v a="$(median "${rw_pp[@]}")" -v b="$(median "${ll_pp[@]}")" 'BEGIN { printf "%.2fx", a / b }')
        dr=$(awk -v a="$(median "${rw_tg[@]}")" -v b="$(median "${ll_tg[@]}")" 'BEGIN { printf "%.2fx", a / b }')
        rr=$(maxof "${rw_rss[@]}")
        rows+=("| $label | $type | $kern | $(range "${rw_pp[@]}") | $(range "${ll_pp[@]}") | $pr | $(range "${rw_tg[@]}") | $(range "${ll_tg[@]}") | $dr | $((rr / 1024)) | $((lr / 1024)) |")
    else
        rows+=("| $label | $type | - | load error | $(range "${ll_pp[@]}") | - | load error | $(range "${ll_tg[@]}") | - | - | $((lr / 1024)) |")
    fi
done

echo
echo "rewind vs llama.cpp, side by side: $cpu, $THREADS threads, $(date -u +%Y-%m-%d), rewind $commit$dirty (kernels ${RW_KERNELS:-auto}, numerics $NUMERICS), llama-bench ${llver:-?} ($LLAMA_BENCH), files: rewind synth${VOCAB:+ with $(basename "$VOCAB")};"
echo "load average (1, 5, 15 min) at the start $load0, at the end $(cut -d' ' -f1-3 /proc/loadavg);"
echo "pp$PROMPT and tg$GEN$at in tok/s (range over $ROUNDS interleaved rounds of $REPS reps; ratio of the medians), peak RSS in MiB (max over rounds)"
echo
echo "| model | type | kernels | pp$PROMPT rewind | pp$PROMPT llama.cpp | prefill ratio | tg$GEN rewind | tg$GEN llama.cpp | decode ratio | peak RSS rewind | peak RSS llama.cpp |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"

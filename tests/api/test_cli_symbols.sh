#!/usr/bin/env bash
# The rewind program's commands are built on the public API: the objects
# named in ON_HEADER below (every command and the program's shared code:
# inspect, logits, perplexity, generate, chat-template, tokenize /
# detokenize, serve's start-up, cache-verify, the option parser, the JSON
# writer, main)
# reference no library function that include/rewind.h does not declare
# (RW_API). Only the synthesizer's command (cmd_synth.c: program code that
# writes test models from the library's model layer) is left out; it is
# counted by tests/api/test_abi_surface.sh. Every other object of src/cli
# must be listed here. The checker is shown to catch an object that calls
# an internal function.
#
# rewind bench: each benchmark object not named in BENCH_BELOW_API (with why
# it must reach below the header: it times one internal layer alone) uses
# the header alone; so does the dispatcher, bench/bench.c.
set -u
export LC_ALL=C
cd "$(dirname "$0")/../.."
build="${RW_BUILD:-build}"
ON_HEADER=(main options cli_model cli_spec cli_json cmd_inspect cmd_gguf_split cmd_imatrix cmd_logits cmd_generate cmd_chat_template
  cmd_tokenize cmd_serve cmd_cache_verify cmd_perplexity perplexity_kld perplexity_hellaswag cmd_quantize)
NOT_ON_HEADER=(cmd_synth)
declare -A BENCH_BELOW_API=(
  [bench_kernels]="matrix products per kernel tier and weight type, the read bandwidth"
  [bench_ops]="attention, convolution, scan and delta-rule kernels alone"
  [bench_experts]="a mixture of experts' grouped matrix products alone"
  [bench_sampler]="the sampler chain and the speculative verify rule alone"
  [bench_grammar]="the grammar matcher's masks over a vocabulary"
  [bench_spec]="drafting and verifying steps, the MTP block's passes, against plain decoding"
  [bench_state]="sequence checkpoints, rewinds and the prefix cache's insert and lookup"
  [bench_model]="forward passes on a sequence (with rewinds) against the weights' bytes"
  [bench_serve]="the HTTP server started in this process on an engine of its own"
  [bench_models]="opens the files, models and tokenizers the benchmarks above time below the header"
)
[ -e "$build/obj/src/cli/cmd_generate.o" ] || { echo "skipped: no CLI objects in $build/obj/src/cli"; exit 77; }
command -v nm > /dev/null || { echo "skipped: no nm"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# the header's functions, comments taken out (as test_server_symbols.sh)
sed 's|/\*.*\*/||g' include/rewind.h | grep -o '^RW_API [^(]*(' | grep -o 'rw_[a-z0-9_]*($' | tr -d '(' |
  sort -u > "$tmp/header"
[ "$(wc -l < "$tmp/header")" -ge 30 ] || { echo "too few RW_API functions read from include/rewind.h"; exit 1; }
# every global the library's modules define (not the programs': cli, server, synth)
for d in "$build"/obj/src/*/; do
  case $(basename "$d") in cli | server | synth) continue ;; esac
  find "$d" -name '*.o' -print0 | xargs -0 -r nm -g --defined-only 2> /dev/null | awk 'NF == 3 { print $3 }'
done | sort -u > "$tmp/lib"
[ -s "$tmp/lib" ] || { echo "no library objects under $build/obj/src"; exit 1; }
comm -23 "$tmp/lib" "$tmp/header" > "$tmp/internal"

# internal OBJ...: the library's internal functions the objects use
internal() { nm -u "$@" 2> /dev/null | awk '{ print $NF }' | sort -u | comm -12 - "$tmp/internal"; }

for o in "${ON_HEADER[@]}"; do
  obj="$build/obj/src/cli/$o.o"
  [ -e "$obj" ] || { echo "no $obj"; fail=1; continue; }
  out=$(internal "$obj")
  if [ -n "$out" ]; then
    echo "src/cli/$o.c uses library functions that include/rewind.h does not declare:"
    echo "$out" | sed 's/^/    /'
    fail=1
  fi
done
for obj in "$build"/obj/src/cli/*.o; do # a new object of src/cli is on the header too
  o=$(basename "$obj" .o)
  [[ " ${ON_HEADER[*]} ${NOT_ON_HEADER[*]} " == *" $o "* ]] ||
    { echo "src/cli/$o.c is not in ON_HEADER (every command object uses the header alone)"; fail=1; }
done
echo "${#ON_HEADER[@]} command objects checked against the header"

n_bench=0
for obj in "$build"/obj/bench/*.o; do
  [ -e "$obj" ] || continue
  o=$(basename "$obj" .o)
  [ -n "${BENCH_BELOW_API[$o]:-}" ] && continue
  n_bench=$((n_bench + 1))
  out=$(internal "$obj")
  if [ -n "$out" ]; then
    echo "bench/$o.c uses library functions that include/rewind.h does not declare (use the header, or name"
    echo "the object in BENCH_BELOW_API with the internal layer it times):"
    echo "$out" | sed 's/^/    /'
    fail=1
  fi
done
for o in "${!BENCH_BELOW_API[@]}"; do
  [ -e "$build/obj/bench/$o.o" ] || { echo "BENCH_BELOW_API names bench/$o.c, which is not built (take it off)"; fail=1; }
done
echo "$n_bench bench objects checked against the header (${#BENCH_BELOW_API[@]} time internal layers)"

# the checker catches a call to an internal function
printf 'struct rw_gguf;\nint rw_gguf_open(const char *p, struct rw_gguf **g, void *e);\nint f(struct rw_gguf **g) { return rw_gguf_open("x", g, 0); }\n' \
  > "$tmp/bad.c"
if cc -c -o "$tmp/bad.o" "$tmp/bad.c" 2> /dev/null; then
  grep -qx rw_gguf_open <<< "$(internal "$tmp/bad.o")" || { echo "the check missed an object calling rw_gguf_open"; fail=1; }
fi
exit $fail

#!/usr/bin/env bash
# rewind generate's sampling options on the qwen3 F32 fixture: the defaults
# and explicit "off" values give the greedy ids, a seed reproduces a sampled
# run, top-k 1 is greedy at any temperature, a huge presence penalty never
# repeats a token, bad values are usage errors. Also: rewind bench sampler
# runs every setting (its JSON shape only; no timing is checked).
set -u
fx="${RW_FIXTURES:-../shared/fixtures}"
bin="${REWIND:-build/rewind}"
out=$("$bin" bench sampler --vocab 3000 --reps 2 --json) || { echo "bench sampler failed"; exit 1; }
python3 -c "
import json, sys
d = json.loads(sys.argv[1]); r = d['results']
assert d['vocab'] == 3000 and len(r) == 24, d
assert all(x['mean_us'] >= 0 and x['best_us'] >= 0 and x['rows'] in ('peaked', 'flat') for x in r), r" "$out" || exit 1
[ -d "$fx/qwen3" ] || { echo "no fixtures"; exit 77; }
model="$fx/qwen3/qwen3-F32.gguf"
ids="$fx/qwen3/qwen3.prompt.ids"
fail=0
check() { if ! "$@"; then echo "FAILED: $*"; fail=1; fi; }
gen() { "$bin" generate "$model" --ids "$ids" -n 24 --print-ids "$@"; }

greedy=$(gen); check [ $? -eq 0 ]
check [ "$(wc -w <<<"$greedy")" -eq 24 ]
off=$(gen --temp 0 --top-k 0 --top-p 1 --min-p 0 --presence-penalty 0 --frequency-penalty 0 --repeat-penalty 1)
check [ "$off" = "$greedy" ]
# filters do not change greedy decoding
check [ "$(gen --top-k 3 --top-p 0.5 --min-p 0.2)" = "$greedy" ]
# top-k 1 keeps only the greedy token
check [ "$(gen --temp 1.5 --top-k 1 --seed 5)" = "$greedy" ]

opts=(--temp 0.9 --top-k 40 --top-p 0.95 --min-p 0.02 --presence-penalty 0.5 --frequency-penalty 0.3 --repeat-penalty 1.1)
a=$(gen "${opts[@]}" --seed 7); check [ $? -eq 0 ]
b=$(gen "${opts[@]}" --seed 7 --threads 1)
check [ "$a" = "$b" ]
check [ "$(wc -w <<<"$a")" -eq 24 ]

# presence penalty 1000: greedy picks each token at most once
p=$(gen --presence-penalty 1000)
check [ "$(tr ' ' '\n' <<<"$p" | sort | uniq -d | wc -l)" -eq 0 ]
check [ "$(wc -w <<<"$p")" -eq 24 ]

for bad in "--top-p 1.5" "--min-p -0.1" "--top-k -1" "--temp x" "--presence-penalty nan" "--repeat-penalty -1"; do
  # shellcheck disable=SC2086
  gen $bad >/dev/null 2>&1; check [ $? -eq 2 ]
done
exit $fail

#!/usr/bin/env bash
# rewind generate --spec mtp|ngram|mtp,ngram: the ids are those of plain
# generation (greedy), on the qwen35mtp fixture, for each mode, fixed and
# adaptive; --spec mtp on a model without the block is a clear error, a bad
# value a usage error; bench spec --spec mtp,ngram reports the MTP costs and
# its runs (JSON).
set -u
bin="${REWIND:-build/rewind}"
FIX="${RW_FIXTURES:-../shared/fixtures}"
F="$FIX/qwen35mtp/qwen35mtp-F32.gguf"
P="$FIX/qwen35mtp/qwen35mtp.prompt.ids"
N="$FIX/qwen35/qwen35-Q8_0.gguf"
[ -f "$F" ] && [ -f "$N" ] || { echo "skipped: no $F"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$bin" generate "$F" --ids "$P" -n 40 --print-ids > "$tmp/plain" || fail "plain generate"
for opts in "--spec mtp" "--spec ngram --spec-ngram-n 1" "--spec mtp,ngram" "--spec mtp --draft-max 3 --draft-fixed" \
  "--spec ngram --spec-ngram-n 1 --spec-ngram-min-hits 2 --draft-fixed" "--spec mtp,ngram --draft-max 5 --draft-fixed"; do
  # shellcheck disable=SC2086
  "$bin" generate "$F" --ids "$P" -n 40 --print-ids $opts > "$tmp/spec" 2> "$tmp/err" || fail "$opts: $(cat "$tmp/err")"
  cmp -s "$tmp/plain" "$tmp/spec" || fail "$opts: ids differ: $(cat "$tmp/spec") vs $(cat "$tmp/plain")"
  grep -q "verify passes" "$tmp/err" || fail "$opts: no statistics: $(cat "$tmp/err")"
done
"$bin" generate "$N" --ids "$P" -n 4 --spec mtp > /dev/null 2> "$tmp/err"
[ $? -eq 1 ] || fail "--spec mtp without the block did not fail"
grep -q "no MTP block" "$tmp/err" || fail "unclear error: $(cat "$tmp/err")"
"$bin" generate "$F" --ids "$P" -n 4 --spec medusa > /dev/null 2> "$tmp/err"
[ $? -eq 2 ] || fail "--spec medusa is not a usage error"
"$bin" bench spec "$F" --spec mtp,ngram --k 1,2 --gen 8 --reps 1 --seqs 2 --threads 1 --json > "$tmp/b.json" 2> "$tmp/err" ||
  fail "bench spec: $(cat "$tmp/err")"
for k in mtp_draft_vs_decode_mean mtp_catch_up_row_vs_decode '"--spec K=4 fixed"' '"--spec adaptive<=4"' ngram_drafted; do
  grep -q "$k" "$tmp/b.json" || fail "bench spec JSON without $k: $(head -c 600 "$tmp/b.json")"
done
echo "ok"

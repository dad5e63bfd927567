#!/usr/bin/env bash
# `rewind CMD --help` (or -h) prints the command's usage, made from its
# option table, on stdout and exits 0, for every command that takes
# options; an unknown option is still an error (exit status 2).
set -u
bin="${REWIND:-build/rewind}"
fail=0
check() { if ! "$@"; then echo "FAILED: $*"; fail=1; fi; }
# command: an option its usage must list
while IFS=: read -r cmd opt; do
  for h in --help -h; do
    # shellcheck disable=SC2086
    out=$("$bin" $cmd $h 2>"${TMPDIR:-/tmp}/help.err.$$"); rc=$?
    check [ $rc -eq 0 ]
    check grep -q "^usage: rewind $cmd" <<<"$out"
    check grep -q -- "^  $opt" <<<"$out"
    check [ ! -s "${TMPDIR:-/tmp}/help.err.$$" ]
  done
done <<'LIST'
serve:--port N
generate:--temp X
logits:--mode batch|step
tokenize:--parse-special
inspect:--json
synth:--preset VALUE
chat-template:--messages VALUE
cache-verify:--ctx N
demo-client:--max-tokens N
bench model:--prompt N
bench serve:--clients VALUE
bench ops:--ctx N
bench kernels:--types VALUE
bench experts:--rows VALUE
bench sampler:--vocab N
bench grammar:--walks N
bench spec:--draft VALUE
bench state:--prompt N
bench chat:--turns N
bench tokenizer:--reps N
perplexity:--ctx N
LIST
rm -f "${TMPDIR:-/tmp}/help.err.$$"
# the help of the options: a model command does not start
# the program's usage line names the words
check grep -q "^usage: rewind perplexity MODEL -f FILE" <<<"$("$bin" perplexity --help)"
check grep -q "^usage: rewind bench model MODEL \[--prompt N\]" <<<"$("$bin" bench model --help)"
check grep -q "^usage: rewind bench grammar VOCAB.gguf" <<<"$("$bin" bench grammar --help)"
out=$("$bin" serve model.gguf --help 2>&1); rc=$?
check [ $rc -eq 0 ]; check grep -q "^usage: rewind serve" <<<"$out"
"$bin" serve --bogus >/dev/null 2>&1; rc=$?
check [ $rc -eq 2 ]
exit $fail

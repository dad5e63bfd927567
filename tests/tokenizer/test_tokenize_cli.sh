#!/usr/bin/env bash
# rewind tokenize / detokenize / bench tokenizer on the fixtures' vocabularies:
# ids as llama.cpp gives them (its .out goldens), -f FILE, --parse-special,
# BOS per add_bos_token and --no-bos, detokenize back to the text, and the
# error exits (1 for a bad model or id, 2 for usage).
set -u
REWIND="${REWIND:-build/rewind}"
FX="${RW_FIXTURES:-../shared/fixtures}"
fail() { echo "FAIL: $*"; exit 1; }
[ -f "$FX/tokenizer/ggml-vocab-qwen3.gguf" ] || { echo "no fixtures"; exit 77; }
Q="$FX/tokenizer/ggml-vocab-qwen3.gguf"
S="$FX/tokenizer/ggml-vocab-llama-spm.gguf"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT

out=$("$REWIND" tokenize "$Q" "Hello world") || fail "tokenize exited $?"
[ "$out" = "9707 1879" ] || fail "Hello world -> '$out'"          # qwen3 .out line 14

printf 'ied 4 \xc2\xbd months' > "$d/t.txt"                        # qwen3 .inp case 1
out=$("$REWIND" tokenize "$Q" -f "$d/t.txt") || fail "tokenize -f exited $?"
[ "$out" = "1122 220 19 220 26062 3951" ] || fail "-f: '$out'"

out=$("$REWIND" tokenize "$Q" "<|im_start|>user<|im_end|>" --parse-special) || fail "--parse-special exited $?"
[ "$out" = "151644 872 151645" ] || fail "--parse-special: '$out'"
out=$("$REWIND" tokenize "$Q" "<|im_start|>user") || fail "plain exited $?"
case "$out" in 151644*) fail "control token parsed without --parse-special: '$out'" ;; esac

out=$("$REWIND" detokenize "$Q" 151644 9707 1879) || fail "detokenize exited $?"
[ "$out" = "<|im_start|>Hello world" ] || fail "detokenize: '$out'"

# SentencePiece vocabulary: BOS (1) added as add_bos_token says, --no-bos drops it
out=$("$REWIND" tokenize "$S" "Hello world") || fail "spm exited $?"
case "$out" in "1 "*) ;; *) fail "spm without BOS: '$out'" ;; esac
nb=$("$REWIND" tokenize "$S" "Hello world" --no-bos) || fail "--no-bos exited $?"
[ "1 $nb" = "$out" ] || fail "--no-bos: '$nb' vs '$out'"
back=$("$REWIND" detokenize "$S" $nb) || fail "spm detokenize exited $?"
[ "$back" = "Hello world" ] || fail "spm detokenize: '$back'"

"$REWIND" tokenize "$d/missing.gguf" "x" >/dev/null 2>"$d/err"; [ $? -eq 1 ] || fail "missing model exit"
grep -q '^rewind tokenize: ' "$d/err" || fail "error line: $(cat "$d/err")"
"$REWIND" tokenize "$Q" -f "$d/missing.txt" >/dev/null 2>&1; [ $? -eq 1 ] || fail "missing file exit"
"$REWIND" detokenize "$Q" 99999999 >/dev/null 2>&1; [ $? -eq 1 ] || fail "out-of-range id exit"
"$REWIND" detokenize "$Q" 12x >/dev/null 2>&1; [ $? -eq 2 ] || fail "bad id is not a usage error"
"$REWIND" tokenize "$Q" >/dev/null 2>&1; [ $? -eq 2 ] || fail "no text is not a usage error"
"$REWIND" tokenize "$Q" a b >/dev/null 2>&1; [ $? -eq 2 ] || fail "two texts is not a usage error"

out=$("$REWIND" bench tokenizer "$Q" -f "$d/t.txt" --reps 2) || fail "bench exited $?"
echo "$out" | grep -Eq '^speed +[0-9.]+ MB/s mean' || fail "bench output: $out"
"$REWIND" bench tokenizer >/dev/null 2>&1; [ $? -eq 2 ] || fail "bench without model is not a usage error"
echo ok

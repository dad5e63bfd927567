#!/usr/bin/env bash
# Split models (llama.cpp's gguf-split layout), on the fixtures:
# - rewind gguf-split writes llama-gguf-split's files: the sha256 of the
#   parts and merges llama-gguf-split (llama.cpp d32676d7) wrote from two
#   fixtures are below (made by hand; skipped with a message when a fixture
#   is not the file they were made from). By hand, all 651 parts and 63
#   merges of every fixture split by 1M, 7 and 128 tensors were identical;
# - a split model opened from its first part gives bitwise the logits of
#   the one file (models of five architectures, split by tensors and by
#   size), and quantizing it writes the same file as quantizing the one
#   file; a merge of the parts runs the same, and splitting the merge again
#   gives the same parts;
# - inspect names the parts; another part, a renamed first part, a missing
#   part, a misnumbered part, a merge of a plain file and bad options are
#   clear errors.
set -u
REWIND="${REWIND:-build/rewind}"
FIX="${RW_FIXTURES:-../shared/fixtures}"
[ -f "$FIX/qwen35/qwen35-Q4_K_M.gguf" ] || { echo "skipped: no fixtures"; exit 77; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

# golden FIXTURE FIXTURE_SHA OPTION PREFIX PART_SHA... MERGE_SHA
golden() {
  local fx=$1 fx_sha=$2 opt=$3 prefix=$4
  shift 4
  if [ "$(sha "$FIX/$fx")" != "$fx_sha" ]; then
    echo "skipped the llama-gguf-split hashes of $fx: not the fixture they were made from"
    return
  fi
  local dir="$d/golden-${prefix}" n=$(($# - 1)) i=1
  mkdir -p "$dir"
  # shellcheck disable=SC2086 # the option and its value are two words
  "$REWIND" gguf-split $opt "$FIX/$fx" "$dir/$prefix" 2>/dev/null || bad "gguf-split $opt $fx"
  for want in "${@:1:$n}"; do
    local part
    part=$(printf '%s/%s-%05d-of-%05d.gguf' "$dir" "$prefix" "$i" "$n")
    [ "$(sha "$part" 2>/dev/null)" = "$want" ] || bad "$fx $opt: $(basename "$part") is not llama-gguf-split's"
    i=$((i + 1))
  done
  local first
  first=$(printf '%s/%s-00001-of-%05d.gguf' "$dir" "$prefix" "$n")
  "$REWIND" gguf-split --merge "$first" "$dir/merged.gguf" 2>/dev/null || bad "merge $fx"
  [ "$(sha "$dir/merged.gguf")" = "${!#}" ] || bad "$fx $opt: the merge is not llama-gguf-split --merge's"
  echo "$fx $opt: $n parts and the merge are llama-gguf-split's"
}

golden qwen35/qwen35-Q4_K_M.gguf 47f7a60c0c8d2e9fe283d085ee7eb58be5b51ee4b5d78294e072615c1162d326 \
  "--split-max-tensors 20" q \
  6bc3cc6a25f659571d47ef907fa94d1c3a1fa36b6f76edbaea8862992107cd54 \
  f48637eaccde6fbd531912014708ea8d7b749e6953a170f9526d5f75d96e68e7 \
  c1a889ba61879d05d3060a39259a2ee194239c93333260ee2eea5349554f1600 \
  302c18dff3b477703c4dbaa24e8b05925e487ddf631bffc202e744d6a27d8199 \
  4a382343f3959721b41cab5e9020287c5e7502402f0d7a922e52c69e99e8de0d \
  cd2fb6d8937e03af1530645a6220a56ca9f154f2cc9eae8afc3d630dc00e9050 \
  4d35e1841382c09d7817fddc58d1726206cb821a468e4842425e629a1286f5f5
golden gemma3/gemma3-Q4_K_M.gguf 4980c1b4698250ef78569c98a323922807dbc8d2fc7d7ab245c7ce3104e1001b \
  "--split-max-size 1M" g \
  93eb03ce2134323dc3673d6914e9fe5bcb5d4c915838fd643180176aaa16c3b3 \
  dde5c6000231233c01132f8b1174e2a538b12d6335afd5d70ea6bbe151291c4c \
  f8fd57301eefe2c34b64bbbe6357027507fd58bc2a2c1d35ec81c70b7664bcdf \
  f584b3068c919eea1b7c87bc4064ae5f199d32316e46259474ab487f14e40ac3

# The split model runs as the one file, bit for bit.
n=0
for fx in qwen35/qwen35-Q4_K_M gemma3/gemma3-Q4_K_M gpt-oss/gpt-oss-MXFP4_MOE lfm2/lfm2-F32 nemotron_h/nemotron_h-Q8_0; do
  f="$FIX/$fx.gguf"
  ids="$(dirname "$f")/$(basename "$(dirname "$f")").prompt.ids"
  [ -f "$f" ] && [ -f "$ids" ] || { echo "skipped $fx: not in the fixtures"; continue; }
  name=$(basename "$fx")
  "$REWIND" logits "$f" --ids "$ids" --out "$d/$name.one.f32" --threads 2 2>/dev/null || { bad "logits $fx"; continue; }
  for opt in "--split-max-tensors 7" "--split-max-size 1M"; do
    rm -rf "$d/s" && mkdir "$d/s"
    # shellcheck disable=SC2086
    "$REWIND" gguf-split $opt "$f" "$d/s/$name" 2>/dev/null || { bad "gguf-split $opt $fx"; continue; }
    first=$(ls "$d/s/$name"-00001-of-*.gguf)
    parts=$(ls "$d/s" | wc -l)
    [ "$parts" -ge 2 ] || bad "$fx $opt: $parts part(s)"
    "$REWIND" logits "$first" --ids "$ids" --out "$d/$name.split.f32" --threads 2 2>/dev/null || bad "logits of split $fx"
    cmp -s "$d/$name.one.f32" "$d/$name.split.f32" || bad "$fx $opt: the split model's logits differ"
    "$REWIND" inspect "$first" | grep -q "a split model: $parts parts" || bad "$fx $opt: inspect does not name the parts"
    n=$((n + 1))
  done
  # merge, then split the merge again: the same parts
  "$REWIND" gguf-split --merge "$first" "$d/$name.merged.gguf" 2>/dev/null || bad "merge $fx"
  "$REWIND" logits "$d/$name.merged.gguf" --ids "$ids" --out "$d/$name.merged.f32" --threads 2 2>/dev/null
  cmp -s "$d/$name.one.f32" "$d/$name.merged.f32" || bad "$fx: the merged model's logits differ"
  rm -rf "$d/s2" && mkdir "$d/s2"
  "$REWIND" gguf-split --split-max-size 1M "$d/$name.merged.gguf" "$d/s2/$name" 2>/dev/null
  for p in "$d/s/$name"-*.gguf; do cmp -s "$p" "$d/s2/$(basename "$p")" || bad "$fx: splitting the merge gives other parts"; done
done
[ "$n" -ge 8 ] || bad "only $n split models ran"
echo "$n split models ran bitwise as their one file"

# Quantizing a split model writes what quantizing the one file writes.
f="$FIX/qwen35/qwen35-F32.gguf"
if [ -f "$f" ]; then
  rm -rf "$d/q" && mkdir "$d/q"
  "$REWIND" gguf-split --split-max-tensors 50 "$f" "$d/q/m" 2>/dev/null || bad "gguf-split qwen35-F32"
  "$REWIND" quantize "$d/q/m-00001-of-00003.gguf" "$d/q/split.gguf" Q4_K_M 2>/dev/null || bad "quantize a split model"
  "$REWIND" quantize "$f" "$d/q/one.gguf" Q4_K_M 2>/dev/null || bad "quantize qwen35-F32"
  cmp -s "$d/q/split.gguf" "$d/q/one.gguf" || bad "quantizing the split model writes another file"
  echo "quantize: the split model's Q4_K_M is the one file's"
fi

# Errors name the file and what is wrong.
s="$d/s"
f="$FIX/qwen35/qwen35-Q4_K_M.gguf"
ids="$FIX/qwen35/qwen35.prompt.ids"
rm -rf "$s" && mkdir "$s"
"$REWIND" gguf-split --split-max-tensors 40 "$f" "$s/m" 2>/dev/null
expect_err() { # WHAT PATTERN COMMAND...
  local what=$1 pat=$2
  shift 2
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] || bad "$what: exit $rc"
  echo "$out" | grep -q -- "$pat" || bad "$what: '$out' lacks '$pat'"
}
expect_err "a later part" "is part 2 of 3 of a split model: open its first part, $s/m-00001-of-00003.gguf" \
  "$REWIND" logits "$s/m-00002-of-00003.gguf" --ids "$ids" --out "$d/x.f32"
cp "$s/m-00001-of-00003.gguf" "$s/renamed.gguf"
expect_err "a renamed first part" "named otherwise than PREFIX-00001-of-00003.gguf" \
  "$REWIND" inspect "$s/renamed.gguf"
mv "$s/m-00003-of-00003.gguf" "$s/hold"
expect_err "a missing part" "part 3 of 3 of a split model: cannot open $s/m-00003-of-00003.gguf" \
  "$REWIND" logits "$s/m-00001-of-00003.gguf" --ids "$ids" --out "$d/x.f32"
cp "$s/m-00002-of-00003.gguf" "$s/m-00003-of-00003.gguf"
expect_err "a misnumbered part" "says it is part 2 of 3, expected part 3 of 3" \
  "$REWIND" inspect "$s/m-00001-of-00003.gguf"
expect_err "merging one file" "is not a split model" "$REWIND" gguf-split --merge "$f" "$d/x.gguf"
[ ! -e "$d/x.gguf" ] || bad "a failed merge left a file"
expect_err "both limits" "usage" "$REWIND" gguf-split --split-max-tensors 3 --split-max-size 1M "$f" "$d/y"
expect_err "a bad size" "split-max-size" "$REWIND" gguf-split --split-max-size 12Q "$f" "$d/y"
expect_err "a missing input" "cannot open" "$REWIND" gguf-split "$d/none.gguf" "$d/y"
ls "$d"/y* >/dev/null 2>&1 && bad "a failed split left a file"

[ "$fail" = 0 ] && echo "PASS test_split.sh"
exit "$fail"

# fixture_lib.sh - sourced by the shell tests that run every fixture model
# file (not a test itself).
#
# fixture_models BIN FX
#   sets fixture_kept to the model files under FX (every architecture's
#   folder; not tokenizer/, quant/ or chat/) whose general.architecture BIN
#   loads (`BIN architectures`), and names each other file as skipped, so a
#   new fixture folder shows up in the log before it runs. Returns 1 when
#   BIN cannot list its architectures.
fixture_models() {
  local bin=$1 fx=$2 loads model arch
  fixture_kept=""
  loads=$("$bin" architectures) || return 1
  for model in $(ls "$fx"/*/*.gguf | grep -v -e /tokenizer/ -e /quant/ -e /chat/); do
    arch=$("$bin" inspect "$model" | awk '$1 == "general.architecture" { gsub(/"/, "", $4); print $4 }')
    if grep -qxF -- "$arch" <<<"$loads"; then fixture_kept="$fixture_kept $model"
    else echo "skipped: $(basename "$model") (architecture \"$arch\" is not loaded by this build)"; fi
  done
}

# fixture_vocab BIN MODEL: the rows of MODEL's token embedding (its vocabulary size).
fixture_vocab() {
  "$1" inspect "$2" | awk '$1 == "token_embd.weight" { gsub(/[^0-9]/, "", $4); print $4 }'
}

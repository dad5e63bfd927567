#!/usr/bin/env bash
# The Python bindings (bindings/python): the unittest suite tests/python/
# against RW_BUILD's librewind.so, then `pip install` of the package into a
# fresh virtual environment and the README's example run from there.
# Skipped (77) without python3, under the sanitizer build (a Python process
# cannot load an ASan library without preloading the runtime) and, after
# the model-free tests, without the fixture models.
set -u
cd "$(dirname "$0")/../.."
build="${RW_BUILD:-build}"
fx="${RW_FIXTURES:-../shared/fixtures}"
py="${PYTHON:-python3}"
command -v "$py" > /dev/null || { echo "skipped: no $py"; exit 77; }
[ "${RW_SANITIZE:-0}" = 1 ] && { echo "skipped: the bindings load the normal build's library"; exit 77; }
lib="$build/librewind.so"
[ -e "$lib" ] || { echo "no $lib (make all builds it)"; exit 1; }
export REWIND_LIBRARY="$PWD/$lib" RW_FIXTURES="$fx"

PYTHONPATH="$PWD/bindings/python" "$py" -m unittest discover -s tests/python -p 'test_*.py' -v 2>&1 || exit 1

model="$fx/qwen35/qwen35-Q8_0.gguf"
[ -f "$model" ] || { echo "skipped: no fixtures at $fx (model-free tests passed)"; exit 77; }
model=$(realpath "$model")

# pip install, as a user does (no network: the system's setuptools and
# wheel build it) into a virtual environment; then the README's example
# from there. Debian's python3 has them (python3-pip, python3-setuptools,
# python3-wheel: scripts/setup.sh installs them); another python3 on PATH
# may not.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pip_py=""
for p in /usr/bin/python3 "$py"; do
  if "$p" -c 'import setuptools, wheel, venv' 2> /dev/null && "$p" -m pip --version > /dev/null 2>&1; then pip_py=$p; break; fi
done
[ -n "$pip_py" ] || { echo "no python3 with pip, setuptools and wheel (scripts/setup.sh installs Debian's)"; exit 1; }
"$pip_py" -m venv --system-site-packages --without-pip "$tmp/venv" || exit 1
cp -r bindings/python "$tmp/src" # pip builds in the folder it is given: not in the tree
"$tmp/venv/bin/python" -m pip install -q --no-index --no-build-isolation "$tmp/src" > "$tmp/pip.log" 2>&1 ||
  { cat "$tmp/pip.log"; exit 1; }
awk '/^```python$/{on=1; next} /^```$/{on=0} on' bindings/python/README.md > "$tmp/example.py"
[ -s "$tmp/example.py" ] || { echo "no python example in bindings/python/README.md"; exit 1; }
# the library found through pkg-config, as after make install
make -s BUILD="$build" install-lib PREFIX="$tmp/prefix" > "$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; exit 1; }
out=$(cd "$tmp" && env -u REWIND_LIBRARY PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" \
  "$tmp/venv/bin/python" -c 'import rewind, rewind._ffi as f; rewind.load_library(); print(f._lib._name)' 2>&1) ||
  { echo "$out"; exit 1; }
[ "$out" = "$tmp/prefix/lib/librewind.so.0" ] || { echo "pkg-config lookup loaded: $out"; exit 1; }
where=$(cd "$tmp" && "$tmp/venv/bin/python" -c 'import rewind; print(rewind.__file__)')
case "$where" in "$tmp/venv/"*) ;; *) echo "the venv imported $where, not the installed package"; exit 1 ;; esac
out=$(cd "$tmp" && "$tmp/venv/bin/python" example.py "$model" 2>&1) || { echo "$out"; exit 1; }
echo "$out"
grep -q "^answer: " <<<"$out" || { echo "the example printed no answer"; exit 1; }
grep -q "^batched answers equal solo ones: True$" <<<"$out" || { echo "the example's engine check failed"; exit 1; }
grep -q "^state file: bitwise the same$" <<<"$out" || { echo "the example's state file check failed"; exit 1; }

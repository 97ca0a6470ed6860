#!/usr/bin/env bash
# The installed package as a user sees it: `cmake --install` into WORK/prefix,
# examples/ copied out of the tree and built against that prefix alone (every
# include path of the build must lie in the prefix or under /usr), then the
# examples run: the custom module's training loop, the custom op's gradcheck,
# and generation from a checkpoint made by a few steps of the installed
# `ember train` on a tiny model and corpus. The examples are configured with
# CLI11 hidden (CMAKE_DISABLE_FIND_PACKAGE_CLI11): the library needs no CLI11,
# and no installed header includes it.
#   check_install.sh BUILD_DIR EXAMPLES_DIR WORK_DIR CXX_COMPILER [LAUNCHER]
set -euo pipefail
build=$1 examples=$2 work=$3 cxx=$4 launcher=${5:-}
prefix=$work/prefix
rm -rf "$prefix" "$work/examples" "$work/run"
mkdir -p "$work"

cmake --install "$build" --prefix "$prefix" > "$work/install.log"
cp -r "$examples" "$work/examples"
cmake -S "$work/examples" -B "$work/examples-build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" \
  ${launcher:+-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher} -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON > "$work/configure.log"
if grep -rlE '#include <CLI/' "$prefix/include"; then
  echo "installed headers above include CLI11"
  exit 1
fi
cmake --build "$work/examples-build" -j 2 > "$work/build.log" || { cat "$work/build.log"; exit 1; }

# No include path into the source tree: only the prefix and the system's.
bad=$(grep -oE -- '(-I|-isystem )[^ "]+' "$work/examples-build/compile_commands.json" |
      sed -E 's/^(-I|-isystem )//' | grep -vE "^($prefix/|/usr/)" || true)
if [[ -n "$bad" ]]; then
  echo "examples compiled with include paths outside the prefix: $bad"
  exit 1
fi

"$work/examples-build/train_custom_module"
"$work/examples-build/custom_op"

# A tiny byte-level model trained for a few steps by the installed `ember`.
cat > "$work/tiny.json" <<'JSON'
{"vocab_size": 256, "d_model": 32, "n_layers": 1, "n_heads": 2, "ffn_hidden": 64, "max_seq_len": 64}
JSON
for i in $(seq 1 200); do echo "line $i: the quick brown fox jumps over the lazy dog."; done > "$work/corpus.txt"
"$prefix/bin/ember" train --config "$work/tiny.json" --data "$work/corpus.txt" --out "$work/run" \
  --steps 10 --batch-size 4 --seq-len 32 --warmup 2 --lr 3e-3 --log-every 5
out=$("$work/examples-build/generate_from_checkpoint" "$work/run/$(cat "$work/run/latest")" "the quick" 40)
echo "$out"
[[ $out == "the quick"* ]] || { echo "generated text does not continue the prompt"; exit 1; }
echo "install check: ok"

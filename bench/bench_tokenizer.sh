#!/usr/bin/env bash
# ember's BPE tokenizer next to the Hugging Face tokenizers library on the
# Debian fortunes corpus: training time, encoding MB/s at 1 and 2 threads, and
# bytes per token, same vocab size (30000, the HF trainer's default).
#   bash bench/bench_tokenizer.sh [BUILD_DIR]     (default: build)
# Needs: apt-get install fortunes; node + npm (the HF binding is installed into
# BUILD_DIR/npm on first use; without it only ember's figures are printed).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bench="$build/bench/bench_tokenizer"
corpus=/usr/share/games/fortunes
[ -x "$bench" ] || { echo "build $bench first: cmake --build $build --target bench_tokenizer" >&2; exit 1; }
[ -d "$corpus" ] || { echo "no $corpus: apt-get install -y fortunes" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== ember"
"$bench" --save "$tmp/ember.tokenizer.json" --docs-out "$tmp/docs.json" "$corpus"

module="$build/npm/node_modules/@anush008/tokenizers"
if [ ! -f "$module/package.json" ] && command -v npm >/dev/null; then
  npm install --silent --no-audit --no-fund --prefix "$build/npm" @anush008/tokenizers >/dev/null 2>&1 || true
fi
if [ ! -f "$module/package.json" ] || ! command -v node >/dev/null; then
  echo "== Hugging Face tokenizers: skipped (node or npm package @anush008/tokenizers unavailable)"
  exit 0
fi
# The same files ember reads: regular files, no .dat indexes (the .u8 names are symlinks).
mapfile -t files < <(find "$corpus" -type f ! -name '*.dat' | sort)
for threads in 1 2; do
  echo "== Hugging Face tokenizers, RAYON_NUM_THREADS=$threads"
  RAYON_NUM_THREADS=$threads EMBER_HF_MODULE="$(realpath "$module")" \
    node bench/bench_tokenizer_hf.js "$tmp/docs.json" --tokenizer "$tmp/ember.tokenizer.json" \
    "${files[@]}" 2>/dev/null | grep "^hf"
done

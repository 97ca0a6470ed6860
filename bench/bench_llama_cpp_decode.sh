#!/usr/bin/env bash
# llama.cpp's side of the decode side-by-side: `ember export --format gguf` of CHECKPOINT at each
# --weights (export time, file size), then llama.cpp's one-stream decode tokens/s on each file at 1
# and 2 threads, best of 3 (bench/llama_cpp_decode.mjs, through node-llama-cpp's prebuilt CPU binary,
# installed into BUILD_DIR/npm-gguf on first use from tests/gguf/package.json; llama.cpp is never built).
#   bash bench/bench_llama_cpp_decode.sh CHECKPOINT [BUILD_DIR]      (default: build)
# Prints one table row per weight type and thread count. ember's own decode speed on the same
# weights is not measured here.
set -euo pipefail
cd "$(dirname "$0")/.."
ck=${1:?usage: bench_llama_cpp_decode.sh CHECKPOINT [BUILD_DIR]}
build=${2:-build}
ember="$build/apps/ember"
[ -x "$ember" ] || { echo "build $ember first: cmake --build $build --target ember" >&2; exit 1; }
npm_dir="$build/npm-gguf"
if [ ! -f "$npm_dir/node_modules/node-llama-cpp/package.json" ]; then
  mkdir -p "$npm_dir" && cp tests/gguf/package.json "$npm_dir/"
  (cd "$npm_dir" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm install --omit=optional --no-audit --no-fund \
     --no-package-lock --loglevel=error) >&2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-8s %10s %9s\n' weights "file MB" "export s"
for w in float32 bf16 int8; do
  start=$(date +%s.%N)
  "$ember" export --checkpoint "$ck" --format gguf --weights "$w" --out "$tmp/$w.gguf" > /dev/null
  end=$(date +%s.%N)
  printf '%-8s %10.1f %9.2f\n' "$w" "$(echo "$(stat -c %s "$tmp/$w.gguf") / 1000000" | bc -l)" \
    "$(echo "$end - $start" | bc -l)"
done
echo
printf '%-8s %7s %22s   %s\n' weights threads "llama.cpp decode tok/s" "runs"
node bench/llama_cpp_decode.mjs "$npm_dir/node_modules" "$tmp/float32.gguf" "$tmp/bf16.gguf" "$tmp/int8.gguf" |
  node -e '
    const lines = require("fs").readFileSync(0, "utf8").trim().split("\n").map(JSON.parse);
    for (const r of lines) {
      const w = r.file.replace(/.*\//, "").replace(".gguf", "");
      console.log(`${w.padEnd(8)} ${String(r.threads).padStart(7)} ${r.best_tokens_per_s.toFixed(1).padStart(22)}   ${r.runs_tokens_per_s.join(" ")}`);
    }'

#!/usr/bin/env bash
# One-stream decode, ember beside llama.cpp on the same model: `ember export --format gguf` of
# CHECKPOINT at each --weights (export time, file size), then per weight type and thread count
# (1 and 2) the best of 3 runs of each side decoding 128 greedy tokens after the same prompt
# (four sentences):
#   ember:     `ember generate --checkpoint CHECKPOINT --weights W --top-k 1` (its decode tokens/s);
#   llama.cpp: the exported W file through node-llama-cpp's prebuilt CPU binary
#              (bench/llama_cpp_decode.mjs; installed into BUILD_DIR/npm-gguf on first use from
#              tests/gguf/package.json; llama.cpp is never built).
#   bash bench/bench_llama_cpp_decode.sh CHECKPOINT [BUILD_DIR]      (default: build)
# A gpt2-small-shaped checkpoint to run it on (random weights, one step):
#   ember train --preset gpt2-small --steps 1 --batch-size 1 --seq-len 64 --out /tmp/g2
# Prints the export table, every (weights, threads) row, then each side at its best thread count
# with ember / llama.cpp and each side's speed as a multiple of its float32.
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

# The prompt llama_cpp_decode.mjs decodes after (the same text, the same tokenizer).
prompt=$(printf 'The quick brown fox jumps over the lazy dog. %.0s' 1 2 3 4)
runs=3
# ember: lines "weights threads best run1 run2 run3"
for w in float32 bf16 int8; do
  for t in 1 2; do
    line="$w $t"
    best=0
    for r in $(seq "$runs"); do
      # stderr's last line: "[...; N tokens, decode X tokens/s]"
      s=$(OMP_NUM_THREADS=$t "$ember" generate --checkpoint "$ck" --weights "$w" --top-k 1 \
            --max-tokens 128 --prompt "$prompt" 2>&1 > /dev/null | tail -1 |
          sed -n 's/.*decode \([0-9.]*\) tokens\/s.*/\1/p')
      [ -n "$s" ] || { echo "ember generate printed no decode speed" >&2; exit 1; }
      line="$line $s"
      best=$(echo "if ($s > $best) $s else $best" | bc -l)
    done
    echo "$w $t $best ${line#"$w $t "}"
  done
done > "$tmp/ember.txt"
node bench/llama_cpp_decode.mjs "$npm_dir/node_modules" --runs "$runs" \
  "$tmp/float32.gguf" "$tmp/bf16.gguf" "$tmp/int8.gguf" > "$tmp/llama.jsonl"
echo
node -e '
  const fs = require("fs");
  const [emberFile, llamaFile] = process.argv.slice(1);
  const ember = {}, llama = {};
  for (const l of fs.readFileSync(emberFile, "utf8").trim().split("\n")) {
    const [w, t, best, ...rs] = l.split(" ");
    (ember[w] ??= {})[t] = { best: Number(best), runs: rs.map(Number) };
  }
  for (const l of fs.readFileSync(llamaFile, "utf8").trim().split("\n")) {
    const r = JSON.parse(l);
    const w = r.file.replace(/.*\//, "").replace(".gguf", "");
    (llama[w] ??= {})[r.threads] = { best: r.best_tokens_per_s, runs: r.runs_tokens_per_s };
  }
  const f = (x) => x.toFixed(1);
  console.log("decode tokens/s, best of runs (the runs after it)");
  console.log(`${"weights".padEnd(8)} ${"threads".padStart(7)} ${"ember".padStart(8)}   ${"runs".padEnd(18)} ${"llama.cpp".padStart(9)}   runs`);
  for (const w of Object.keys(ember)) {
    for (const t of Object.keys(ember[w])) {
      const e = ember[w][t], l = llama[w][t];
      console.log(`${w.padEnd(8)} ${t.padStart(7)} ${f(e.best).padStart(8)}   ${e.runs.map(f).join(" ").padEnd(18)} ${f(l.best).padStart(9)}   ${l.runs.map(f).join(" ")}`);
    }
  }
  const best = (side, w) => Object.entries(side[w]).reduce((a, [t, r]) => (r.best > a.v ? { t, v: r.best } : a), { t: 0, v: 0 });
  console.log("\neach side at its best thread count");
  console.log(`${"weights".padEnd(8)} ${"ember".padStart(12)} ${"llama.cpp".padStart(12)} ${"ember/llama.cpp".padStart(16)} ${"ember x f32".padStart(12)} ${"llama.cpp x f32".padStart(16)}`);
  const e32 = best(ember, "float32").v, l32 = best(llama, "float32").v;
  for (const w of Object.keys(ember)) {
    const e = best(ember, w), l = best(llama, w);
    console.log(`${w.padEnd(8)} ${(f(e.v) + " (" + e.t + ")").padStart(12)} ${(f(l.v) + " (" + l.t + ")").padStart(12)} ${(e.v / l.v).toFixed(2).padStart(15)}x ${(e.v / e32).toFixed(2).padStart(11)}x ${(l.v / l32).toFixed(2).padStart(15)}x`);
  }
' "$tmp/ember.txt" "$tmp/llama.jsonl"

#!/usr/bin/env bash
# CTest fixture of the serve tests (tests/serve/CMakeLists.txt): a tiny checkpoint in WORK/run (a BPE
# tokenizer of 300 tokens with ChatML's special tokens, trained 150 steps on CORPUS plus generated
# sentences the model learns to repeat), and the npm package `openai` of package.json installed in
# WORK/node. Without npm or the registry it says why and installs nothing (the tests then skip), except
# under CI (CI set, not "false"/"0"), where that is a failure.
# Usage: setup.sh EMBER SOURCE_DIR WORK CORPUS
set -euo pipefail
ember=$1 src=$2 work=$3 corpus=$4
in_ci() { [ -n "${CI:-}" ] && [ "$CI" != "false" ] && [ "$CI" != "0" ]; }

mkdir -p "$work"
cat > "$work/tiny.json" <<'JSON'
{"vocab_size": 300, "d_model": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "ffn_hidden": 64, "max_seq_len": 1024}
JSON
names=(Ada Bob Cleo Dan Eve Finn Gus Hal) verbs=(sees helps calls meets finds likes)
things=("the red boat" "a small dog" "the old mill" "a green kite" "the tall tree" "a blue cup")
{
  cat "$corpus"
  for ((i = 0; i < 300; i++)); do
    echo "${names[i % 8]} ${verbs[(i * 5 / 3) % 6]} ${things[(i * 7 / 2) % 6]}."
  done
} > "$work/corpus.txt"
rm -rf "$work/run"
"$ember" train --config "$work/tiny.json" --vocab-size 300 --data "$work/corpus.txt" --out "$work/run" \
  --steps 150 --batch-size 8 --seq-len 64 --warmup 10 --lr 0.02 --log-every 50 --eval-batches 1

mkdir -p "$work/node"
cp "$src/package.json" "$work/node/package.json"
installed=$(node -p "require('$work/node/node_modules/openai/package.json').version" 2>/dev/null || true)
if [[ "$installed" == 6.* ]]; then
  echo "openai $installed already in $work/node"
  exit 0
fi
why=""
if ! command -v npm > /dev/null; then
  why="npm is not installed (apt-get install nodejs npm, or scripts/install_deps.sh)"
elif ! (cd "$work/node" && npm install --no-audit --no-fund --no-package-lock --prefer-offline --loglevel=error); then
  why="npm install of openai@^6 into $work/node failed (no registry?)"
fi
if [ -n "$why" ]; then
  if in_ci; then echo "FAILED: $why"; exit 1; fi
  echo "$why: the serve client tests will skip"
fi

#!/usr/bin/env bash
# CTest fixture of the GGUF tests (tests/gguf/CMakeLists.txt): five tiny checkpoints in WORK, one per
# GGUF architecture ember maps (qwen3: QK-norm and GQA; llama: no QK-norm, untied head; gpt2: LayerNorm,
# learned positions, tanh GELU, biases; qwen3moe: QK-norm and 4 experts, top 2; llamamoe: llama with
# 4 experts, top 2, as Mixtral), each over a 300-token BPE tokenizer with ChatML's special tokens and
# trained 120 steps on CORPUS plus sentences it learns to repeat, exported at float32, bf16 and int8;
# and the npm packages of package.json
# (@huggingface/gguf, node-llama-cpp with only its prebuilt CPU linux-x64 binary: optional dependencies
# omitted, no download or build of llama.cpp) installed in WORK/node. Without npm or the registry it says
# why (the tests then skip), except under CI (CI set, not "false"/"0"), where that is a failure.
# Usage: setup.sh EMBER SOURCE_DIR WORK CORPUS
set -euo pipefail
ember=$1 src=$2 work=$3 corpus=$4
in_ci() { [ -n "${CI:-}" ] && [ "$CI" != "false" ] && [ "$CI" != "0" ]; }

mkdir -p "$work"
names=(Ada Bob Cleo Dan Eve Finn Gus Hal) verbs=(sees helps calls meets finds likes)
things=("the red boat" "a small dog" "the old mill" "a green kite" "the tall tree" "a blue cup")
{
  cat "$corpus"
  for ((i = 0; i < 300; i++)); do
    echo "${names[i % 8]} ${verbs[(i * 5 / 3) % 6]} ${things[(i * 7 / 2) % 6]}."
  done
} > "$work/corpus.txt"
common='"vocab_size": 300, "d_model": 64, "n_layers": 2, "n_heads": 4, "max_seq_len": 128'
echo "{$common, \"n_kv_heads\": 2, \"ffn_hidden\": 96, \"qk_norm\": true}" > "$work/qwen3.json"
echo "{$common, \"ffn_hidden\": 96, \"tie_embeddings\": false}" > "$work/llama.json"
echo "{$common, \"norm\": \"layernorm\", \"pos\": \"learned\", \"ffn_act\": \"gelu_tanh\", \"bias\": true}" \
  > "$work/gpt2.json"
echo "{$common, \"qk_norm\": true, \"moe\": {\"n_experts\": 4, \"top_k\": 2, \"expert_hidden\": 48}}" \
  > "$work/qwen3moe.json"
echo "{$common, \"moe\": {\"n_experts\": 4, \"top_k\": 2, \"expert_hidden\": 48}}" > "$work/llamamoe.json"
for arch in qwen3 llama gpt2 qwen3moe llamamoe; do
  rm -rf "$work/$arch" "$work/$arch".*.gguf
  "$ember" train --config "$work/$arch.json" --vocab-size 300 --data "$work/corpus.txt" --out "$work/$arch" \
    --steps 120 --batch-size 8 --seq-len 64 --warmup 10 --lr 0.02 --log-every 60 --eval-batches 1
  for w in float32 bf16 int8; do
    "$ember" export --checkpoint "$work/$arch/$(cat "$work/$arch/latest")" --format gguf --weights "$w" \
      --out "$work/$arch.$w.gguf"
  done
done

mkdir -p "$work/node"
cp "$src/package.json" "$work/node/package.json"
if [ -f "$work/node/node_modules/node-llama-cpp/package.json" ] &&
   [ -f "$work/node/node_modules/@huggingface/gguf/package.json" ]; then
  echo "node-llama-cpp and @huggingface/gguf already in $work/node"
  exit 0
fi
why=""
if ! command -v npm > /dev/null; then
  why="npm is not installed (apt-get install nodejs npm, or scripts/install_deps.sh)"
elif ! (cd "$work/node" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm install --omit=optional --no-audit --no-fund \
          --no-package-lock --prefer-offline --loglevel=error); then
  why="npm install of node-llama-cpp and @huggingface/gguf into $work/node failed (no registry?)"
fi
if [ -n "$why" ]; then
  if in_ci; then echo "FAILED: $why"; exit 1; fi
  echo "$why: the GGUF tests will skip"
fi

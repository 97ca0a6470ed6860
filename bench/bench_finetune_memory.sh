#!/usr/bin/env bash
# Peak memory and step time of fine-tuning a 124M-parameter base (the gpt2-small
# preset, trained one step on the fortunes corpus so it is a real checkpoint) on the
# example chat data, four ways: every weight (--full), LoRA over float32 weights, and
# QLoRA over nf4 and nf4-dq weights. Each run is its own process, so its peak RSS
# (what `ember finetune` prints at the end) is that mode's alone.
#   bash bench/bench_finetune_memory.sh [BUILD_DIR] [STEPS]     (defaults: build, 4)
# Prints one row per mode: trained parameters, peak RSS, median ms per step after the first.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
steps=${2:-4}
ember="$build/apps/ember"
data=examples/chat/fortunes_chat.jsonl
[ -x "$ember" ] || { echo "build $ember first: cmake --build $build --target ember" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$ember" train --preset gpt2-small --steps 1 --batch-size 1 --seq-len 64 --warmup 0 \
  --out "$tmp/base" > "$tmp/base.log" 2>&1 || { cat "$tmp/base.log" >&2; exit 1; }
base="$tmp/base/$(cat "$tmp/base/latest")"

printf '%-18s %14s %14s %12s\n' mode trained peak_RSS_MiB ms/step
for mode in "--full" "--quantize none" "--quantize nf4" "--quantize nf4-dq"; do
  out="$tmp/ft_${mode//[^a-z0-9]/_}"
  # shellcheck disable=SC2086  # mode is two words on purpose
  "$ember" finetune --base "$base" --data "$data" --add-chat-tokens $mode --steps "$steps" \
    --batch-size 4 --seq-len 128 --warmup 0 --log-every 1 --val-fraction 0 --sequential \
    --out "$out" > "$out.log" 2>&1 || { cat "$out.log" >&2; exit 1; }
  trained=$(sed -n 's/.*: \([0-9]*\) trained parameters.*/\1/p' "$out.log")
  rss=$(sed -n 's/^peak RSS \([0-9.]*\) MiB.*/\1/p' "$out.log")
  ms=$(grep -E '^step +[0-9]+/' "$out.log" | tail -n +2 | sed -n 's/.*| \([0-9]*\) ms |.*/\1/p' |
       sort -n | awk '{a[NR]=$1} END {print (NR ? a[int((NR + 1) / 2)] : "-")}')
  printf '%-18s %14s %14s %12s\n' "${mode#--}" "$trained" "$rss" "$ms"
done

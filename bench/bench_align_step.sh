#!/usr/bin/env bash
# Cost and peak memory of an `ember align` step against an `ember finetune` step on the same
# rows: the fine-tune trains on each pair's prompt and chosen answer as a conversation (B rows
# a step), align on the pairs (both sides, 2B rows a step, in halves of B rows). The base is the
# default model trained a few steps on the default corpus. Each run is its own process, so its
# peak RSS (printed at the end) is that command's alone.
#   bash bench/bench_align_step.sh [BUILD_DIR] [STEPS] [extra options for both, e.g. --checkpoint-activations]
# Prints one row per command: peak RSS, median ms per step after the first, and align / finetune.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
steps=${2:-20}
shift $(($# < 2 ? $# : 2))
ember="$build/apps/ember"
pairs=examples/align/fortune_pairs.jsonl
[ -x "$ember" ] || { echo "build $ember first: cmake --build $build --target ember" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$ember" train --steps 2 --batch-size 2 --warmup 0 --out "$tmp/base" > "$tmp/base.log" 2>&1 ||
  { cat "$tmp/base.log" >&2; exit 1; }
base="$tmp/base/$(cat "$tmp/base/latest")"
# The chosen side of each pair as a conversation: the fine-tune's rows.
python3 -c '
import json, sys
for line in open(sys.argv[1]):
    p = json.loads(line)
    print(json.dumps({"messages": p["prompt"] + p["chosen"]}))' "$pairs" > "$tmp/chosen.jsonl"

common=(--base "$base" --add-chat-tokens --steps "$steps" --batch-size 8 --seq-len 160 --warmup 0
        --log-every 1 --val-fraction 0 --sequential --lora-targets q,k,v,o,gate,up,down "$@")
run() {  # name command data: writes "rss ms" to $tmp/name.row
  "$ember" "$2" --data "$3" --out "$tmp/$1" "${common[@]}" > "$tmp/$1.log" 2>&1 ||
    { cat "$tmp/$1.log" >&2; exit 1; }
  rss=$(sed -n 's/^peak RSS \([0-9.]*\) MiB.*/\1/p' "$tmp/$1.log")
  ms=$(grep -E '^step +[0-9]+/' "$tmp/$1.log" | tail -n +2 | sed -n 's/.*| \([0-9]*\) ms |.*/\1/p' |
       sort -n | awk '{a[NR]=$1} END {print (NR ? a[int((NR + 1) / 2)] : "-")}')
  echo "$rss $ms" > "$tmp/$1.row"
}
run finetune finetune "$tmp/chosen.jsonl"
run align align "$pairs"
read -r ft_rss ft_ms < "$tmp/finetune.row"
read -r al_rss al_ms < "$tmp/align.row"
printf '%-10s %14s %10s\n' command peak_RSS_MiB ms/step
printf '%-10s %14s %10s\n' finetune "$ft_rss" "$ft_ms" align "$al_rss" "$al_ms"
awk -v a="$al_rss" -v f="$ft_rss" -v am="$al_ms" -v fm="$ft_ms" \
  'BEGIN {printf "align / finetune: peak RSS %.3fx, step %.2fx\n", a / f, am / fm}'

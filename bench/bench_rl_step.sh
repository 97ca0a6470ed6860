#!/usr/bin/env bash
# Cost of an `ember rl` step's update phase against an `ember finetune` step over the same tokens
# (docs/cli.md#rl-from-a-reward): rl's update phase is its old-policy pass, its reference pass and
# --iterations forward/backward/AdamW updates over the step's B x G rows (chunks of B rows, each
# as wide as its longest prompt + completion); the finetune step runs --batch-size B
# --grad-accum G rows of the mean chunk width, the same tokens. The base is README's chat model
# when it is there (runs/chat/merged.h5), else the default model trained 2 steps.
#   bash bench/bench_rl_step.sh [BUILD_DIR] [STEPS] [extra rl options, e.g. --algo ppo --full]
# Prints the median update_ms of rl's steps after the first, the finetune's median ms per step
# after the first, and their ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
steps=${2:-12}
shift $(($# < 2 ? $# : 2))
ember="$build/apps/ember"
[ -x "$ember" ] || { echo "build $ember first: cmake --build $build --target ember" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
base=runs/chat/merged.h5
if [ ! -f "$base" ]; then
  "$ember" train --steps 2 --batch-size 2 --warmup 0 --out "$tmp/base" > "$tmp/base.log" 2>&1 ||
    { cat "$tmp/base.log" >&2; exit 1; }
  base="$tmp/base/$(cat "$tmp/base/latest")"
fi
B=8 G=8
"$ember" rl --base "$base" --prompts examples/rl/arithmetic.jsonl --reward match --out "$tmp/rl" \
  --steps "$steps" --batch-size $B --group-size $G --max-tokens 64 --val-fraction 0 --warmup 0 \
  --log-every 1 --lora-targets q,k,v,o,gate,up,down --rollouts-out "$tmp/rollouts.jsonl" "$@" \
  > "$tmp/rl.log" 2>&1 || { cat "$tmp/rl.log" >&2; exit 1; }
# The median update_ms after the first step, and the mean chunk width (B consecutive rows).
read -r rl_ms width < <(python3 - "$tmp/rl/metrics.jsonl" "$tmp/rollouts.jsonl" $B <<'PY'
import json, statistics, sys
ms = [json.loads(l)["update_ms"] for l in open(sys.argv[1]) if '"update_ms"' in l][1:]
rows = [json.loads(l) for l in open(sys.argv[2])]
B = int(sys.argv[3])
widths = [max(len(r["prompt_ids"]) + len(r["completion_ids"]) - 1 for r in rows[i:i + B])
          for i in range(0, len(rows), B)]
print(statistics.median(ms), round(sum(widths) / len(widths)))
PY
)
# The finetune rows: each prompt with a long answer, cut to the chunk width.
python3 -c '
import json, sys
for line in open("examples/rl/arithmetic.jsonl"):
    p = json.loads(line)
    print(json.dumps({"messages": p["prompt"] + [{"role": "assistant", "content": (p["answer"] + " ") * 20}]}))' \
  > "$tmp/chat.jsonl"
"$ember" finetune --base "$base" --data "$tmp/chat.jsonl" --out "$tmp/ft" --steps "$steps" \
  --batch-size $B --grad-accum $G --seq-len "$width" --val-fraction 0 --warmup 0 --log-every 1 \
  --lora-targets q,k,v,o,gate,up,down $(printf '%s\n' "$@" | grep -x -- --full || true) \
  > "$tmp/ft.log" 2>&1 || { cat "$tmp/ft.log" >&2; exit 1; }
ft_ms=$(grep -E '^step +[0-9]+/' "$tmp/ft.log" | tail -n +2 | sed -n 's/.*| \([0-9]*\) ms |.*/\1/p' |
        sort -n | awk '{a[NR]=$1} END {print (NR ? a[int((NR + 1) / 2)] : "-")}')
printf 'rows per step %d x %d, chunk width %d tokens\n' $B $G "$width"
printf 'rl update phase %.0f ms, finetune step %s ms: %.2fx\n' "$rl_ms" "$ft_ms" \
  "$(awk -v a="$rl_ms" -v b="$ft_ms" 'BEGIN {print a / b}')"

#!/usr/bin/env bash
# The pipeline bubble of `ember train --pp 2` against its formula (P - 1) / (M + P - 1): the
# default model on the default corpus, each rank's batch of B rows cut into M micro-batches,
# under mpirun -np 2 (one core per rank on a 2-core machine), for each M given. Reads each
# run's profile.json ("pipeline": every stage's forward, backward and wait ms per step after the
# warm-up) and prints per M: each stage's idle share (1 - its forward + backward over the span,
# the longest stage's forward + backward + wait), the pipeline's (the stages' mean), and the
# formula's. Run it on an otherwise idle machine.
#   bash bench/bench_pipeline.sh [BUILD_DIR] [STEPS] [M ...] [-- extra train options]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
steps=${2:-20}
shift $(($# < 2 ? $# : 2))
ms=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do ms+=("$1"); shift; done
[ $# -gt 0 ] && shift
[ ${#ms[@]} -gt 0 ] || ms=(2 4 8)
ember="$build/apps/ember"
[ -x "$ember" ] || { echo "build $ember first: cmake --build $build --target ember" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_WAIT_POLICY=PASSIVE
printf '%-4s %-10s %-10s %-10s %-10s %-10s %s\n' M ms/step stage idle_0 idle_1 mean formula
for m in "${ms[@]}"; do
  out="$tmp/m$m"
  mpirun --oversubscribe -np 2 "$ember" train --pp 2 --micro-batches "$m" --batch-size 8 --seq-len 256 \
    --steps "$steps" --warmup 0 --eval-batches 0 --profile --out "$out" "$@" > "$tmp/log$m" 2>&1 ||
    { cat "$tmp/log$m" >&2; exit 1; }
  python3 - "$out/profile.json" "$m" <<'PY'
import json, sys
prof = json.load(open(sys.argv[1])); m = int(sys.argv[2]); p = prof["pipeline"]
busy = [f + b for f, b in zip(p["forward_ms_per_step"], p["backward_ms_per_step"])]
idle = p["idle"]; P = len(idle)
print(f"{m:<4} {prof['wall_ms_per_step']:<10.1f} {'/'.join(f'{b:.0f}' for b in busy):<10} "
      f"{idle[0]:<10.3f} {idle[1]:<10.3f} {p['pipeline_idle']:<10.3f} {(P - 1) / (m + P - 1):.3f}")
PY
done

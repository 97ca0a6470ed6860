#!/usr/bin/env bash
# `ember info`'s per-rank memory against the measured peak RSS of each rank of the
# `ember train` run it describes: the gpt2-small preset on the fortunes corpus, 2 steps
# of B x T per rank, at 1 and 2 ranks (mpirun --oversubscribe -np 2) and ZeRO 0, 1, 2, 3,
# and with --checkpoint-activations at --zero 0 and 3. tests/memory/peak_rss records each
# rank's ru_maxrss (the final checkpoint's save included, as in any run).
#   bash bench/bench_memory_per_rank.sh [BUILD_DIR] [B] [T]     (defaults: build, 4, 256)
# Prints one markdown row per run and rank: predicted MiB, measured MiB, error.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
batch=${2:-4}
seq=${3:-256}
ember="$build/apps/ember"
peak="$build/tests/memory/peak_rss"
for exe in "$ember" "$peak"; do
  [ -x "$exe" ] || { echo "build $exe first: cmake --build $build --target ember peak_rss" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=PASSIVE

echo "| ranks | --zero | recompute | rank | predicted MiB | measured MiB | error |"
echo "|---|---|---|---|---|---|---|"
for case in "1 0" "1 1" "1 2" "1 3" "2 0" "2 1" "2 2" "2 3" "2 0 --checkpoint-activations" "2 3 --checkpoint-activations"; do
  read -r w k extra <<< "$case"
  out="$tmp/run"
  rm -rf "$out" "$out".rss.*
  # shellcheck disable=SC2086  # extra is empty or one flag
  train=("$ember" train --preset gpt2-small --out "$out" --steps 2 --batch-size "$batch" --seq-len "$seq"
         --eval-batches 0 --log-every 0 --zero "$k" $extra)
  if [ "$w" = 1 ]; then
    "$peak" "$out.rss" -- "${train[@]}" > "$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }
  else
    mpirun --oversubscribe --bind-to none -np "$w" "$peak" "$out.rss" -- "${train[@]}" > "$tmp/log" 2>&1 ||
      { cat "$tmp/log" >&2; exit 1; }
  fi
  # shellcheck disable=SC2086
  predicted=$("$ember" info --preset gpt2-small --batch-size "$batch" --seq-len "$seq" --world-size "$w" \
              --zero "$k" $extra | sed -n 's/^  total *\([0-9.]*\) MiB/\1/p')
  for ((r = 0; r < w; ++r)); do
    kib=$(cat "$out.rss.$r")
    awk -v w="$w" -v k="$k" -v x="${extra:+every block}" -v r="$r" -v p="$predicted" -v kib="$kib" 'BEGIN {
      m = kib / 1024; printf "| %d | %d | %s | %d | %.1f | %.1f | %+.1f %% |\n", w, k, (x ? x : "none"), r, p, m, 100 * (p - m) / m }'
  done
done

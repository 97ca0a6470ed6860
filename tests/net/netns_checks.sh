# shellcheck shell=bash
# Sourced by netns_train.sh: its checks, each failing the test with a message (fail). They use its
# variables: ember, tool, work, common (the `ember train` options), params, STEPS, FAULT_BOUND_S, and
# netns_lib.sh's.

# Each rank runs on its own node: a probe that prints the rank's hostname.
check_hostnames() {
  local out i
  out=$(mpi_job "${#NET_NODES[@]}" 60 sh -c 'echo "rank $OMPI_COMM_WORLD_RANK on $(hostname)"' 2>&1) ||
    { echo "$out"; fail "mpirun across the nodes"; }
  echo "$out"
  for i in "${!NET_NODES[@]}"; do
    grep -qx "rank $i on ${NET_NODES[i]}" <<< "$out" || fail "rank $i must run on ${NET_NODES[i]}"
  done
}

# Run folder $1: one process at batch $2 (run once).
reference_run() {
  [ -f "$1/latest" ] && return
  OMP_NUM_THREADS=1 "$ember" "${common[@]}" --batch-size "$2" --out "$1" > "$1.log" 2>&1 ||
    { cat "$1.log"; fail "W=1 B=$2 reference run"; }
}

# "step tokens loss" of each training step in run folder $1's metrics.jsonl.
step_losses() {
  awk 'match($0, /"loss":[^,}]*/) {
         loss = substr($0, RSTART + 7, RLENGTH - 7)
         match($0, /"step":[0-9]+/); step = substr($0, RSTART + 7, RLENGTH - 7)
         match($0, /"tokens":[0-9]+/); tokens = substr($0, RSTART + 9, RLENGTH - 9)
         print step, tokens, loss }' "$1/metrics.jsonl"
}

# Run folders $1 and $2 logged the same steps, tokens and losses (relative 1e-6).
compare_losses() {
  paste -d' ' <(step_losses "$1") <(step_losses "$2") |
    awk '{ d = $3 - $6; if (d < 0) d = -d; m = $3 > $6 ? $3 : $6
           ok = $1 != "" && $1 == $4 && $2 == $5 && d <= 1e-6 * m
           printf "step %s: tokens %s vs %s, loss %s vs %s%s\n", $1, $2, $5, $3, $6, ok ? "" : "  <- differs"
           bad += !ok; n++ }
         END { exit n == 0 || bad }'
}

# Run mode $1 (W = $2 ranks, extra train flags $3, D = $4 data-parallel ranks) at B=4 per rank across
# the links ends as one process at B=4D did, and node1's link carried at least 4 bytes x parameters per
# step each way: the float32 gradient's share it sends for the others' sums plus its own slice of the
# result ((W-1)/W + 1/W; a ring all-reduce sends 2 (W-1)/W of it), and as much received; a pipeline
# (D < W) at least its activations one way and their gradients the other.
check_mode() {
  local name=$1 world=$2 data=$4 out=$work/$1 ref=$work/w1b$((4 * $4)) final tx0 rx0 t0 secs tx rx floor what
  local -a flags
  read -ra flags <<< "$3"
  reference_run "$ref" $((4 * data))
  final=$(printf 'step_%08d.h5' "$STEPS")
  tx0=$(link_bytes node1 tx) rx0=$(link_bytes node1 rx) t0=$(now)
  mpi_job "$world" 180 "$ember" "${common[@]}" --batch-size 4 "${flags[@]}" --out "$out" > "$out.log" 2>&1 ||
    { cat "$out.log"; fail "$name: mpirun -np $world ember train across the nodes"; }
  secs=$(seconds_since "$t0")
  tx=$(($(link_bytes node1 tx) - tx0)) rx=$(($(link_bytes node1 rx) - rx0))
  # Data parallelism all-reduces every gradient (4 bytes a parameter) each step; a pipeline of one
  # stage per node sends each step's activations [4, 16, d_model 16] in float32 one way and their
  # gradients the other.
  floor=$((STEPS * 4 * params)) what="4 x $params parameters"
  if ((data < world)); then floor=$((STEPS * 4 * 16 * 16 * 4)) what="activations 4 x 16 x 16 x 4 bytes"; fi
  # One pass over B=4D sums the gradients in another order than the ranks do: 1e-4 (train_parity.cmake).
  "$tool" compare "$out/$final" "$ref/$final" 1e-4 || fail "$name: W=$world across the links differs from one process"
  compare_losses "$out" "$ref" || fail "$name: the losses of W=$world across the links differ from one process"
  echo "$name: W=$world across the links = W=1 B=$((4 * data)); $STEPS steps in ${secs} s (launch included);" \
       "node1's link sent $tx and received $rx bytes: $((tx / STEPS)) and $((rx / STEPS)) per step, floor" \
       "$what = $((floor / STEPS))"
  ((tx >= floor && rx >= floor)) || fail "$name: fewer bytes crossed the link than the run needs"
}

# A long run whose link goes down (in node2) after its first checkpoint: the job must end within
# FAULT_BOUND_S with a non-zero exit and Open MPI's message, no rank left, the last checkpoint loadable.
check_link_down() {
  local out=$work/fault pid t0 secs rc=0 last
  mpi_job 2 300 "$ember" train --config "$work/tiny.json" --data "$work/train.bin" --seq-len 16 --steps 1000000 \
    --batch-size 4 --log-every 100 --save-every 50 --keep 2 --out "$out" > "$out.log" 2>&1 &
  pid=$!
  t0=$(now)
  until [ -s "$out/latest" ]; do
    kill -0 "$pid" 2> /dev/null || { cat "$out.log"; fail "link down: the run ended before its first checkpoint"; }
    (($(seconds_since "$t0" | cut -d. -f1) < 120)) || fail "link down: no checkpoint within 120 s"
    sleep 0.2
  done
  sleep 1
  t0=$(now)
  ip -n "$EMBER_NET_PREFIX-node2" link set "$NET_DEV" down || fail "ip link set $NET_DEV down in node2"
  while kill -0 "$pid" 2> /dev/null && (($(seconds_since "$t0" | cut -d. -f1) < FAULT_BOUND_S)); do sleep 0.2; done
  secs=$(seconds_since "$t0")
  kill -0 "$pid" 2> /dev/null && { tail -20 "$out.log"; echo; fail "link down: the job still ran ${secs} s later (a hang)"; }
  wait "$pid" || rc=$?
  grep -v '^\[' "$out.log" | tail -15
  ((rc != 0)) || fail "link down: the job exited with 0"
  grep -q "ORTE has lost communication with a remote daemon" "$out.log" &&
    grep -q "Remote daemon: .* on node node2" "$out.log" || fail "link down: no message naming the lost node"
  for _ in $(seq 50); do  # node2's orted ends its rank on its own, within a few seconds
    [ -z "$(ip netns pids "$EMBER_NET_PREFIX-node2")" ] && break
    sleep 0.2
  done
  [ -z "$(ip netns pids "$EMBER_NET_PREFIX-node2")" ] || fail "link down: processes left in node2 10 s later"
  last=$(cat "$out/latest")
  "$ember" eval --checkpoint "$out/$last" --data "$work/train.bin" --seq-len 16 --batches 4 ||
    fail "link down: the last checkpoint $last does not load"
  echo "link down: the job ended ${secs} s after \`ip link set $NET_DEV down\` in node2 (exit $rc, bound" \
       "$FAULT_BOUND_S s); its last checkpoint $last loads"
}

#!/usr/bin/env bash
# Data-parallel `ember train` across a real network stack: three "nodes" (network + UTS namespaces, each
# with a veth link to a bridge, netns_lib.sh), Open MPI started in node1 and reaching the others through
# rsh_agent.sh, TCP only over those links. Checks each rank's hostname, W ranks = 1 process per run mode
# (MODES) with the bytes that crossed node1's link, and that a link taken down mid-run ends the job with a
# message in bounded time, its last checkpoint intact. Needs root: otherwise exit 77 (CTest's skip), a
# failure when CI is set.
# Usage: netns_train.sh EMBER TRAIN_PARITY_TOOL MPIRUN WORK
set -uo pipefail
ember=$1 tool=$2 mpirun=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
source "$here/netns_lib.sh"

# One line per run mode: NAME|W|extra `ember train` flags of a run with one rank on each of nodes 1..W,
# batch 4 per rank, which must end where one process with batch 4 D ends (e.g. "zero3|2|--zero 3");
# D, the data-parallel ranks, is W unless a fourth field gives it ("pipeline|2|--pp 2|1": the
# layout (1, 2, 1), a stage on each node, activations and their gradients crossing the link).
MODES=(
  "allreduce|2|"
  "zero1|2|--zero 1 --bucket-mb 1"
  "zero2|2|--zero 2 --bucket-mb 1"
  "zero3|2|--zero 3"
  "allreduce-3nodes|3|"
  "zero1-3nodes|3|--zero 1 --bucket-mb 1"
  "zero3-3nodes|3|--zero 3"
  "pipeline|2|--pp 2|1"
)
STEPS=10
FAULT_BOUND_S=30  # the job must end within this many seconds of the link going down

fail() {
  echo "FAILED: $*"
  exit 1
}

skip_or_fail() {
  if [ -n "${CI:-}" ] && [ "$CI" != "false" ] && [ "$CI" != "0" ]; then
    fail "$1 (CI is set, so this is not skipped)"
  fi
  echo "SKIPPED: $1"
  exit 77
}

[ "$(id -u)" -eq 0 ] || skip_or_fail "needs root (ip netns, veth links, nsenter)"
for cmd in ip nsenter unshare; do
  command -v "$cmd" > /dev/null || skip_or_fail "needs $cmd (iproute2, util-linux)"
done

export EMBER_NET_PREFIX=emn$$ EMBER_NET_RUN=/run/emn$$
net_remove_leftovers
trap 'net_remove "$EMBER_NET_PREFIX"; rm -rf "$work"' EXIT
trap 'exit 1' INT TERM
rm -rf "$work" && mkdir -p "$work"
net_create 2> "$work/net_create.log" ||
  skip_or_fail "cannot make network namespaces here: $(tail -1 "$work/net_create.log")"
# mpirun splits --mca plm_rsh_agent at spaces and needs it executable: a copy in a path without either.
agent=$EMBER_NET_RUN/rsh_agent.sh
cp "$here/rsh_agent.sh" "$agent" && chmod +x "$agent" || fail "cannot copy rsh_agent.sh to $agent"

# TCP only (no shared memory) and only over the link; OOB keepalives find a dead link in ~5 s.
# shellcheck disable=SC2054  # (the comma in tcp,self)
mpi_opts=(--bind-to none -x OMP_NUM_THREADS=1
          -x XDG_CACHE_HOME="${XDG_CACHE_HOME:-$EMBER_NET_RUN/cache}"  # the matmul peak cache: not root's home
          --mca plm_rsh_agent "$agent" --mca btl tcp,self
          --mca btl_tcp_if_include "$NET_DEV" --mca oob_tcp_if_include "$NET_DEV"
          --mca oob_tcp_keepalive_time 2 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3)

# mpi_job W SECONDS ARGS...: mpirun ARGS with one rank on each of nodes 1..W, started in node1 (as
# rsh_agent.sh enters a node), killed after SECONDS.
mpi_job() {
  local hosts
  hosts=$(IFS=,; echo "${NET_NODES[*]:0:$1}")
  timeout -k 10 "$2" nsenter --uts="$EMBER_NET_RUN/uts-node1" ip netns exec "$EMBER_NET_PREFIX-node1" \
    "$mpirun" --host "$hosts" -np "$1" "${mpi_opts[@]}" "${@:3}"
}

now() { date +%s.%N; }
seconds_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

source "$here/netns_checks.sh"

check_hostnames
"$tool" data "$work" > /dev/null || fail "train_parity_tool data"
common=(train --config "$work/tiny.json" --data "$work/train.bin" --sequential --seq-len 16
        --steps "$STEPS" --warmup 2 --lr 1e-2 --log-every 5)
params=$("$ember" info --config "$work/tiny.json" | sed -n 's/^parameters .*(\([0-9]*\))$/\1/p')
[ -n "$params" ] || fail "no parameter count from ember info"
for mode in "${MODES[@]}"; do
  IFS='|' read -r name world flags data <<< "$mode"
  check_mode "$name" "$world" "$flags" "${data:-$world}"
done
check_link_down
echo "PASSED"

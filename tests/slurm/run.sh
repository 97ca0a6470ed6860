#!/usr/bin/env bash
# CTests slurm_train / slurm_requeue / slurm_tp: a one-machine Slurm cluster (munged, slurmctld and slurmd
# of Debian's slurm-wlm, on ports of their own, every file in a temporary folder) runs
# scripts/slurm/train.sbatch with 2 MPI ranks. MODE train: a srun job trains a new run, then an mpirun job
# resumes it. MODE requeue: a srun job told its time limit is near checkpoints, requeues itself and
# resumes. MODE tp: a srun job trains with --tp 2, (T, P, D) = (2, 1, 1), checked against the same run in
# one process (TOOL: tests/mpi's train_parity_tool). Checks the logs and the checkpoints (ember eval on the
# last one). Stops and removes everything it started, also on failure; a killed earlier run's leftovers
# first. Without root or the packages it skips (exit 77), except under CI (CI set, not "false"/"0"),
# where that is a failure.
# Usage: run.sh EMBER SOURCE_DIR WORK MODE [TOOL]
set -uo pipefail
ember=$1 src=$2 work=$3 mode=$4 tool=${5:-}
ctld_port=26817 slurmd_port=26818  # not Slurm's 6817/6818: never talks to a real cluster on this machine
config='{"vocab_size": 256, "d_model": 128, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "ffn_hidden": 256,
         "max_seq_len": 64}'

in_ci() { [ -n "${CI:-}" ] && [ "$CI" != "false" ] && [ "$CI" != "0" ]; }
skip() {
  if in_ci; then echo "FAILED: $1 (CI is set, so this is not skipped)"; exit 1; fi
  echo "SKIPPED: $1"
  exit 77
}
fail() {
  echo "FAILED: $*"
  exit 1
}

check_requirements() {
  [ "$(id -u)" -eq 0 ] || skip "needs root (it starts munged, slurmctld and slurmd as root)"
  local missing=()
  for c in munged mungekey slurmctld slurmd sbatch sinfo scontrol scancel srun mpirun; do
    command -v "$c" > /dev/null || missing+=("$c")
  done
  [ ${#missing[@]} -eq 0 ] || skip "needs ${missing[*]} (apt-get install slurm-wlm munge openmpi-bin)"
}

# Every process the cluster started carries EMBER_SLURM_CLUSTER=DIR in its environment (daemons, step
# daemons, job scripts, ranks): how a later run finds what a killed one left behind.
cluster_pids() {
  grep -lzxF "EMBER_SLURM_CLUSTER=$1" /proc/[0-9]*/environ 2> /dev/null | cut -d/ -f3
}

stop_cluster() {
  local dir=$1 pids i
  [ -n "$dir" ] && [ -d "$dir" ] || return 0
  [ -f "$dir/slurm.conf" ] && SLURM_CONF=$dir/slurm.conf timeout 10 scancel --full --quiet --user=root 2> /dev/null
  for signal in TERM TERM TERM TERM TERM KILL; do
    pids=$(cluster_pids "$dir")
    [ -z "$pids" ] && break
    # shellcheck disable=SC2086
    kill -"$signal" $pids 2> /dev/null
    for ((i = 0; i < 10; i++)); do [ -z "$(cluster_pids "$dir")" ] && break; sleep 0.2; done
  done
  rm -rf "$dir"
}

cleanup() {
  local code=$?
  if [ "$code" -ne 0 ] && [ "$code" -ne 77 ] && [ -n "${dir:-}" ] && [ -d "$dir" ]; then
    mkdir -p "$work/failed" && cp "$dir"/*.log "$dir"/job*.out "$work/failed/" 2> /dev/null
    for f in "$dir"/slurmctld.log "$dir"/slurmd.log; do
      echo "--- last lines of $f (copies in $work/failed)"; tail -n 15 "$f" 2> /dev/null
    done
  fi
  stop_cluster "${dir:-}"
  rm -f "$work/cluster_dir"
  exit "$code"
}

# The node's own line from `slurmd -C` (CPUs, sockets, cores, RealMemory), so slurmd agrees with it.
write_slurm_conf() {
  local host node
  host=$(hostname -s)
  node=$(slurmd -C | grep '^NodeName=') || fail "slurmd -C printed no NodeName line"
  cat > "$dir/slurm.conf" <<EOF
ClusterName=embertest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
TmpFS=$dir/tmp
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

# munged needs its socket's folders searchable by all; its key readable by root only.
start_cluster() {
  mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/tmp"
  chmod 755 "$dir" "$dir/munge"
  mungekey --create --keyfile="$dir/munge/munge.key" || fail "mungekey could not create a key"
  env EMBER_SLURM_CLUSTER="$dir" munged -F --socket="$dir/munge/socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/seed" \
    > "$dir/munged.out" 2>&1 &
  for ((i = 0; i < 50; i++)); do [ -S "$dir/munge/socket" ] && break; sleep 0.2; done
  [ -S "$dir/munge/socket" ] || fail "munged did not create its socket"
  write_slurm_conf
  export SLURM_CONF=$dir/slurm.conf
  env EMBER_SLURM_CLUSTER="$dir" slurmctld -D -f "$SLURM_CONF" > "$dir/slurmctld.out" 2>&1 &
  env EMBER_SLURM_CLUSTER="$dir" slurmd -D -f "$SLURM_CONF" > "$dir/slurmd.out" 2>&1 &
  local state=""
  for ((i = 0; i < 120; i++)); do
    state=$(sinfo -h -o %T 2> /dev/null)
    [ "$state" = idle ] && break
    sleep 0.5
  done
  [ "$state" = idle ] || fail "the node is not idle after 60 s (sinfo: ${state:-no answer})"
  sinfo
  srun --mpi=list 2>&1 | tr '\n' ' '
  echo
  srun --mpi=list 2>&1 | grep -qw pmix || fail "this Slurm has no PMIx plugin (srun --mpi=list)"
}

job_field() { scontrol show job "$1" -o 2> /dev/null | grep -o "\b$2=[^ ]*" | cut -d= -f2; }

# Waits until job $1 reaches a state matching $2 (an extended regex), at most $3 seconds.
wait_state() {
  local state=""
  for ((i = 0; i < $3 * 2; i++)); do
    state=$(job_field "$1" JobState)
    [[ "$state" =~ ^($2)$ ]] && return 0
    sleep 0.5
  done
  fail "job $1 is ${state:-unknown}, not $2, after $3 s"
}

submit() {  # submit LOG ENV...: prints the job id
  env EMBER_SLURM_CLUSTER="$dir" EMBER="$ember" EMBER_RUN_DIR="$dir/run" EMBER_CONFIG="$dir/model.json" \
    EMBER_DATA="$src/tests/fixtures/small_corpus.txt" EMBER_SAVE_EVERY=100 TMPDIR="$dir/tmp" \
    EMBER_TRAIN_ARGS="--batch-size 8 --seq-len 64 --log-every 10" "${@:2}" \
    sbatch --parsable --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 --time=30 --output="$1" \
    "$src/scripts/slurm/train.sbatch"
}

expect_in_log() {  # expect_in_log LOG PATTERN...: each an extended regex some line matches
  local pattern
  for pattern in "${@:2}"; do
    grep -qE -- "$pattern" "$1" || { show_log "$1"; fail "$1 has no line matching \"$pattern\""; }
  done
}
show_log() { echo "--- $1"; tr '\r' '\n' < "$1" | grep -v '^\[' ; }  # without mpirun's progress bars

# `ember eval` on checkpoint $1 reproduces the validation loss that log $2's line for step $3 printed.
check_checkpoint() {
  local out logged evaluated
  out=$("$ember" eval --checkpoint "$1" --data "$dir/run/data/val_000000.bin" --seq-len 64 --batch-size 1) \
    || fail "ember eval could not use $1: $out"
  echo "ember eval $1: $out"
  logged=$(grep -E "^step +$3/" "$2" | grep -oE '\| val [0-9.]+' | grep -oE '[0-9.]+$')
  evaluated=$(echo "$out" | grep -oE '^loss [0-9.]+' | grep -oE '[0-9.]+$')
  if [ -z "$logged" ] || [ -z "$evaluated" ]; then
    fail "no validation loss to compare (log: '$logged', eval: '$evaluated')"
  fi
  awk -v a="$logged" -v b="$evaluated" 'BEGIN { exit !(a - b < 1.5e-4 && b - a < 1.5e-4) }' \
    || fail "ember eval's loss $evaluated differs from the logged val $logged"
  [ "$(cat "$dir/run/latest")" = "$(basename "$1")" ] || fail "run/latest is $(cat "$dir/run/latest"), not $(basename "$1")"
}

# MODE requeue, srun: told its time limit is near (the USR1 of #SBATCH --signal), it checkpoints and requeues;
# its second start resumes from that checkpoint and finishes the 300 steps.
srun_job_requeued() {
  local log=$dir/job1.out job stopped
  job=$(submit "$log" EMBER_STEPS=300 EMBER_LAUNCH=srun) || fail "sbatch refused the job"
  for ((i = 0; i < 120; i++)); do grep -qE '^step +1/' "$log" 2> /dev/null && break; sleep 0.5; done
  grep -qE '^step +1/' "$log" 2> /dev/null || { show_log "$log"; fail "job $job printed no step in 60 s"; }
  scancel --batch --signal=USR1 "$job" || fail "scancel --signal=USR1 failed"
  for ((i = 0; i < 120; i++)); do [ "$(job_field "$job" Restarts)" = 1 ] && break; sleep 0.5; done
  [ "$(job_field "$job" Restarts)" = 1 ] || { show_log "$log"; fail "job $job was not requeued"; }
  # Slurm holds a requeued job for 2 minutes; start it once the old steps' files are gone (a step of the
  # same id cannot start while the old one's PMIx socket exists).
  for ((i = 0; i < 120; i++)); do
    compgen -G "$dir/spool/*[._]$job.[0-9]*" > /dev/null || break
    sleep 0.5
  done
  scontrol update JobId="$job" StartTime=now || fail "scontrol could not release job $job"
  finish_job "$job" "$log"
  expect_in_log "$log" "^ember train: 2 ranks x 1 threads" "time limit near: checkpointing" \
    "^stopped by signal 15 at step [0-9]+; checkpoint step_[0-9]+\.h5" "launcher exited with 143; requeueing" \
    "\(restart 1\) on .* launcher srun" "srun --mpi=pmix .* train --resume $dir/run " "^step +300/300 " \
    "^done: 300 steps"
  stopped=$(grep -oE '^stopped by signal 15 at step [0-9]+' "$log" | grep -oE '[0-9]+$')
  [ "$stopped" -lt 300 ] || fail "the run stopped at step $stopped, not before its end"
  [ -f "$dir/run/$(printf 'step_%08d.h5' "$stopped")" ] || fail "no checkpoint of step $stopped"
  check_checkpoint "$dir/run/step_00000300.h5" "$log" 300
}

# Waits for job $1 to end, prints its log $2 and checks that it completed.
finish_job() {
  wait_state "$1" "COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY" 180
  show_log "$2"
  [ "$(job_field "$1" JobState)" = COMPLETED ] || fail "job $1 ended $(job_field "$1" JobState)"
}

# MODE train, job 1, srun: a new run of 150 steps.
srun_job_trains() {
  local log=$dir/job1.out job
  job=$(submit "$log" EMBER_STEPS=150 EMBER_LAUNCH=srun) || fail "sbatch refused the job"
  finish_job "$job" "$log"
  expect_in_log "$log" "launcher srun" "^ember train: 2 ranks x 1 threads" \
    "srun --mpi=pmix .* train --config $dir/model.json .* --out $dir/run " "^step +150/150 " "^done: 150 steps"
  check_checkpoint "$dir/run/step_00000150.h5" "$log" 150
}

# MODE train, job 2, mpirun inside the allocation: resumes the run and takes it to 170 steps.
mpirun_job_resumes() {
  local log=$dir/job2.out job
  job=$(submit "$log" EMBER_STEPS=170 EMBER_LAUNCH=mpirun EMBER_KILL_WAIT=5 OMPI_ALLOW_RUN_AS_ROOT=1 \
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1) || fail "sbatch refused the job"
  finish_job "$job" "$log"
  expect_in_log "$log" "launcher mpirun" "^ember train: 2 ranks x 1 threads" \
    "mpirun -np 2 .* train --resume $dir/run " "^--resume: --steps 170 overrides the run's 150" \
    "^step +170/170 " "^done: 170 steps"
  check_checkpoint "$dir/run/step_00000170.h5" "$log" 170
}

# MODE tp, srun: `ember train --tp 2` on the job's 2 ranks, each a tensor rank of one data-parallel rank,
# against the same run in one process outside Slurm: every step's loss and gradient norm and the
# validation losses (train_parity_tool metrics: relative 1e-6 and 1e-5) and the final weights (relative
# 1e-4 per tensor: the row-parallel sums add the halves of each product in another order).
srun_job_tensor_parallel() {
  local log=$dir/job1.out job args="--batch-size 4 --seq-len 64 --log-every 1 --eval-every 5"
  job=$(submit "$log" EMBER_STEPS=10 EMBER_LAUNCH=srun EMBER_TRAIN_ARGS="$args --tp 2") \
    || fail "sbatch refused the job"
  finish_job "$job" "$log"
  expect_in_log "$log" "launcher srun" "^ember train: 2 ranks x 1 threads, --tp 2 x 1 data-parallel" \
    "srun --mpi=pmix .* train --config $dir/model.json .* --tp 2" "^step +10/10 " "^done: 10 steps"
  check_checkpoint "$dir/run/step_00000010.h5" "$log" 10
  # shellcheck disable=SC2086  # args is a list of words on purpose
  OMP_NUM_THREADS=1 "$ember" train --config "$dir/model.json" --data "$src/tests/fixtures/small_corpus.txt" \
    --out "$dir/one" --steps 10 --save-every 100 $args > "$dir/one.out" 2>&1 \
    || { show_log "$dir/one.out"; fail "the one-process run failed"; }
  "$tool" metrics "$dir/run" "$dir/one" || fail "the --tp 2 job's metrics differ from one process's"
  "$tool" compare "$dir/run/step_00000010.h5" "$dir/one/step_00000010.h5" 1e-4 \
    || fail "the --tp 2 job's final weights differ from one process's"
}

[[ "$mode" =~ ^(train|requeue|tp)$ ]] || fail "MODE must be train, requeue or tp, not $mode"
[ "$mode" != tp ] || [ -x "$tool" ] || fail "MODE tp needs TOOL, tests/mpi's train_parity_tool"
check_requirements
mkdir -p "$work"
[ -f "$work/cluster_dir" ] && stop_cluster "$(cat "$work/cluster_dir")"  # a killed earlier run's cluster
dir=$(mktemp -d /tmp/ember-slurm.XXXXXX) || fail "mktemp failed"
echo "$dir" > "$work/cluster_dir"
trap cleanup EXIT
trap 'exit 143' TERM INT
echo "$config" > "$dir/model.json"
start_cluster
if [ "$mode" = train ]; then
  srun_job_trains
  mpirun_job_resumes
  echo "PASSED: scripts/slurm/train.sbatch under Slurm: a new run launched by srun, resumed by mpirun"
elif [ "$mode" = tp ]; then
  srun_job_tensor_parallel
  echo "PASSED: scripts/slurm/train.sbatch under Slurm: --tp 2 on 2 ranks equals one process"
else
  srun_job_requeued
  echo "PASSED: scripts/slurm/train.sbatch under Slurm: near its time limit, checkpointed, requeued and resumed"
fi

#!/bin/sh
# Open MPI's rsh agent for tests/net (--mca plm_rsh_agent): called like ssh, `rsh_agent.sh HOST COMMAND...`,
# it runs COMMAND (mpirun's orted launch line) inside HOST's UTS and network namespaces. EMBER_NET_PREFIX
# and EMBER_NET_RUN (exported by netns_train.sh, inherited through mpirun) name them (netns_lib.sh).
set -eu
host=$1
shift
uts="$EMBER_NET_RUN/uts-$host"
if [ ! -e "$uts" ]; then
  echo "rsh_agent.sh: no node named $host" >&2
  exit 255
fi
exec nsenter --uts="$uts" ip netns exec "$EMBER_NET_PREFIX-$host" sh -c "$*"

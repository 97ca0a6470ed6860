# shellcheck shell=bash
# Sourced by netns_train.sh: "nodes" on one machine. Node NAME (node1, node2) is the network namespace
# $EMBER_NET_PREFIX-NAME plus a UTS namespace (hostname NAME) kept alive by a bind mount on the file
# $EMBER_NET_RUN/uts-NAME. A veth pair joins them, named emb0 at both ends, with 10.77.0.N/24 addresses
# that exist only inside the namespaces; /etc/netns/PREFIX-NAME/hosts (bind-mounted over /etc/hosts by
# `ip netns exec`) resolves the node names. Runs are prefixed emn<PID> so that two runs never collide.
NET_DEV=emb0
NET_NODES=(node1 node2)

# on_node NAME COMMAND...: COMMAND inside node NAME (what rsh_agent.sh does for mpirun).
on_node() {
  local name=$1
  shift
  nsenter --uts="$EMBER_NET_RUN/uts-$name" ip netns exec "$EMBER_NET_PREFIX-$name" "$@"
}

# link_bytes NAME tx|rx: the byte counter of node NAME's end of the link.
link_bytes() {
  ip netns exec "$EMBER_NET_PREFIX-$1" cat "/sys/class/net/$NET_DEV/statistics/$2_bytes"
}

# net_create: both nodes, their link and hosts files (non-zero exit on the first failure).
net_create() {
  local p=$EMBER_NET_PREFIX i name hosts="127.0.0.1 localhost"$'\n'
  mkdir -p "$EMBER_NET_RUN" || return 1
  for i in "${!NET_NODES[@]}"; do hosts+="10.77.0.$((i + 1)) ${NET_NODES[i]}"$'\n'; done
  for i in "${!NET_NODES[@]}"; do
    name=${NET_NODES[i]}
    ip netns add "$p-$name" || return 1
    touch "$EMBER_NET_RUN/uts-$name" && unshare --uts="$EMBER_NET_RUN/uts-$name" hostname "$name" || return 1
    mkdir -p "/etc/netns/$p-$name" && printf '%s' "$hosts" > "/etc/netns/$p-$name/hosts" || return 1
    ip -n "$p-$name" link set lo up || return 1
  done
  ip link add "${p}a" netns "$p-node1" type veth peer name "${p}b" netns "$p-node2" || return 1
  ip -n "$p-node1" link set "${p}a" name "$NET_DEV" && ip -n "$p-node2" link set "${p}b" name "$NET_DEV" || return 1
  for i in "${!NET_NODES[@]}"; do
    ip -n "$p-${NET_NODES[i]}" addr add "10.77.0.$((i + 1))/24" dev "$NET_DEV" || return 1
    ip -n "$p-${NET_NODES[i]}" link set "$NET_DEV" up || return 1
  done
}

# net_remove PREFIX: every process, namespace (the veth pair goes with it), hosts file and UTS bind
# mount of run PREFIX; quiet about what is already gone.
net_remove() {
  local p=$1 ns uts pids
  for ns in $(ip netns list 2> /dev/null | awk '{print $1}' | grep "^$p-"); do
    pids=$(ip netns pids "$ns" 2> /dev/null)
    [ -n "$pids" ] && kill -9 $pids 2> /dev/null  # one pid per word
    ip netns delete "$ns" 2> /dev/null
    rm -rf "/etc/netns/$ns"
  done
  for uts in "/run/$p"/uts-*; do
    [ -e "$uts" ] && umount "$uts" 2> /dev/null
  done
  rm -rf "/run/$p"
  ip link delete "${p}a" 2> /dev/null
  rmdir /etc/netns 2> /dev/null
  return 0
}

# net_remove_leftovers: the remains of runs whose script no longer runs (killed by a CTest timeout).
net_remove_leftovers() {
  local p pid
  for p in $( (ip netns list 2> /dev/null | awk '{print $1}'; ls /run) | grep -oE '^emn[0-9]+' | sort -u); do
    pid=${p#emn}
    grep -qs netns_train "/proc/$pid/cmdline" && continue
    echo "removing the leftovers of an earlier run: $p"
    net_remove "$p"
  done
}

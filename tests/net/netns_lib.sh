# shellcheck shell=bash
# Sourced by netns_train.sh: "nodes" on one machine. Node NAME (node1..node3) is the network namespace
# $EMBER_NET_PREFIX-NAME plus a UTS namespace (hostname NAME) kept alive by a bind mount on the file
# $EMBER_NET_RUN/uts-NAME. Each node's veth link, named emb0, with address 10.77.0.N/24 (that exists
# only inside the namespaces), leads to a bridge in the namespace PREFIX-switch; /etc/netns/PREFIX-NAME/
# hosts (bind-mounted over /etc/hosts by `ip netns exec`) resolves the node names. Runs are prefixed
# emn<PID> so that two runs never collide.
NET_DEV=emb0
NET_NODES=(node1 node2 node3)

# link_bytes NAME tx|rx: the byte counter of node NAME's end of its link.
link_bytes() {
  ip netns exec "$EMBER_NET_PREFIX-$1" cat "/sys/class/net/$NET_DEV/statistics/$2_bytes"
}

# net_add_node N NAME HOSTS: node NAME with address 10.77.0.N, its hosts file and its link to the bridge.
net_add_node() {
  local p=$EMBER_NET_PREFIX n=$1 name=$2 hosts=$3
  ip netns add "$p-$name" || return 1
  touch "$EMBER_NET_RUN/uts-$name" && unshare --uts="$EMBER_NET_RUN/uts-$name" hostname "$name" || return 1
  mkdir -p "/etc/netns/$p-$name" && printf '%s' "$hosts" > "/etc/netns/$p-$name/hosts" || return 1
  ip link add "${p}n$n" netns "$p-$name" type veth peer name "port$n" netns "$p-switch" || return 1
  ip -n "$p-$name" link set "${p}n$n" name "$NET_DEV" || return 1
  ip -n "$p-$name" addr add "10.77.0.$n/24" dev "$NET_DEV" || return 1
  ip -n "$p-$name" link set lo up && ip -n "$p-$name" link set "$NET_DEV" up || return 1
  ip -n "$p-switch" link set "port$n" master br0 && ip -n "$p-switch" link set "port$n" up
}

# net_create: the bridge and every node (non-zero exit on the first failure).
net_create() {
  local p=$EMBER_NET_PREFIX i hosts="127.0.0.1 localhost"$'\n'
  mkdir -p "$EMBER_NET_RUN" || return 1
  ip netns add "$p-switch" || return 1
  ip -n "$p-switch" link add br0 type bridge && ip -n "$p-switch" link set br0 up || return 1
  for i in "${!NET_NODES[@]}"; do hosts+="10.77.0.$((i + 1)) ${NET_NODES[i]}"$'\n'; done
  for i in "${!NET_NODES[@]}"; do
    net_add_node $((i + 1)) "${NET_NODES[i]}" "$hosts" || return 1
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

#!/usr/bin/env bash
# A two-node cluster on one machine, for tests and users: two network namespaces ("nodes"
# dts-node-a and dts-node-b) joined by a veth pair shaped with HTB, and an Open MPI job of
# 2 x ranks-per-node ranks across them (TCP between the nodes, shared memory within each).
# Everything it makes is removed when it ends, also on INT, TERM or HUP. Needs root, ip, tc.
#   scripts/cluster/two-node.sh [--rate 1gbit|none] [--rate-b RATE] [--ranks-per-node 2] [--keep-going] -- COMMAND ARGS...
#   e.g. scripts/cluster/two-node.sh -- build/harness/dtsuite run collectives --quick
# --rate-b: what node b sends at, where it differs from --rate (node a's): one node's link slower
# than the other's, for the topology suite's node verdict (default: --rate).
# Exit code: mpirun's; 2 for a usage or set-up error (one line on stderr); 128+N on signal N.
# --keep-going: run over an unshaped link when HTB or the sysctl cannot be set (a warning),
# instead of failing. MPIRUN selects the launcher (an Open MPI mpirun; default: mpirun).
set -euo pipefail

usage() {
  echo "usage: $0 [--rate RATE|none] [--rate-b RATE] [--ranks-per-node N] [--keep-going] -- COMMAND [ARGS...]" >&2
  exit 2
}
die() {  # a set-up error: one line, exit 2
  echo "two-node: $*" >&2
  exit 2
}

rate=1gbit
rate_b=""
ranks_per_node=2
keep_going=0
while [ $# -gt 0 ]; do
  case $1 in
    --rate) [ $# -ge 2 ] || usage; rate=$2; shift 2 ;;
    --rate=*) rate=${1#*=}; shift ;;
    --rate-b) [ $# -ge 2 ] || usage; rate_b=$2; shift 2 ;;
    --rate-b=*) rate_b=${1#*=}; shift ;;
    --ranks-per-node) [ $# -ge 2 ] || usage; ranks_per_node=$2; shift 2 ;;
    --ranks-per-node=*) ranks_per_node=${1#*=}; shift ;;
    --keep-going) keep_going=1; shift ;;
    -h|--help) usage ;;
    --) shift; break ;;
    *) usage ;;
  esac
done
[ $# -gt 0 ] || usage
[[ $ranks_per_node =~ ^[1-9][0-9]*$ ]] || die "--ranks-per-node must be a positive integer, not '$ranks_per_node'"
# tc's own rate syntax (bit, kbit, mbit, gbit, or bytes per second: bps, kbps, ...).
[[ $rate == none || $rate =~ ^[0-9]+(\.[0-9]+)?([kKmMgGtT]?(bit|bps))$ ]] \
  || die "--rate must be a tc rate such as 500mbit or 1gbit, or none, not '$rate'"
rate_b=${rate_b:-$rate}
if [ "$rate" = none ]; then
  [ "$rate_b" = none ] || die "--rate-b needs a shaped link: give --rate a rate too, not none"
else
  [[ $rate_b =~ ^[0-9]+(\.[0-9]+)?([kKmMgGtT]?(bit|bps))$ ]] \
    || die "--rate-b must be a tc rate such as 500mbit, not '$rate_b'"
fi
PATH=$PATH:/usr/sbin:/sbin   # ip and tc live there; a user's PATH may lack it
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces); run as root or under sudo"
for tool in ip tc unshare hostname; do
  command -v "$tool" >/dev/null || die "'$tool' not found (Debian: apt-get install iproute2 util-linux hostname)"
done
mpirun=${MPIRUN:-mpirun}
command -v "$mpirun" >/dev/null || die "'$mpirun' not found (Debian: apt-get install openmpi-bin)"

# Names and addresses unique per invocation: the pid picks them. A pid is below 2^22, and
# 10.0.0.0/8 holds 2^22 /30 blocks, so each fixture gets its own /30. The addresses exist only
# inside the namespaces, so nothing on the host can route to or collide with them.
id=$$
ns_a=dts-$id-a ns_b=dts-$id-b
veth_a=dtsv${id}a veth_b=dtsv${id}b   # interface names have at most 15 characters
node_a=dts-node-a node_b=dts-node-b
base=$((10 << 24 | id << 2))
addr() { echo "$(($1 >> 24 & 255)).$(($1 >> 16 & 255)).$(($1 >> 8 & 255)).$(($1 & 255))"; }
addr_a=$(addr $((base + 1))) addr_b=$(addr $((base + 2))) subnet=$(addr "$base")/30

work=""
mpirun_pid=""
cleaned=0
# Idempotent, and safe from any point of the set-up: removes only what this invocation made.
cleanup() {
  [ "$cleaned" -eq 0 ] || return 0
  cleaned=1
  trap '' INT TERM HUP   # a second Ctrl-C must not cut the clean-up short
  set +e
  if [ -n "$mpirun_pid" ] && kill -0 "$mpirun_pid" 2>/dev/null; then
    # mpirun takes its daemons and ranks down on TERM; give it a few seconds to do so.
    kill -TERM "$mpirun_pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$mpirun_pid" 2>/dev/null || break; sleep 0.1; done
  fi
  # Whatever still runs in a node (a daemon or rank that outlived mpirun) was started here.
  local ns pids
  for ns in "$ns_a" "$ns_b"; do
    [ -e "/run/netns/$ns" ] || continue
    pids=$(ip netns pids "$ns" 2>/dev/null)
    # shellcheck disable=SC2086  # one pid per word
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null
  done
  # A namespace lives on while a process is in it: wait for the killed ones to be gone.
  for ns in "$ns_a" "$ns_b"; do
    [ -e "/run/netns/$ns" ] || continue
    for _ in $(seq 50); do [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break; sleep 0.1; done
    ip netns del "$ns" 2>/dev/null   # takes its end of the veth pair, and so the pair, with it
  done
  [ -z "$work" ] || rm -rf "$work"
}
exit_code=0
on_signal() {  # exit 128+N, like a shell killed by signal N; the EXIT trap cleans up
  exit_code=$((128 + $2))
  echo "two-node: $1, stopping the job and removing the nodes" >&2
  exit "$exit_code"
}
trap cleanup EXIT
trap 'on_signal SIGINT 2' INT
trap 'on_signal SIGTERM 15' TERM
trap 'on_signal SIGHUP 1' HUP

work=$(mktemp -d "${TMPDIR:-/tmp}/dts-two-node-$id.XXXXXX")

# --- the nodes and the link -----------------------------------------------------------------
for ns in "$ns_a" "$ns_b"; do
  err=$(ip netns add "$ns" 2>&1) || die "cannot create network namespace $ns: $err"
done
err=$(ip link add "$veth_a" netns "$ns_a" type veth peer name "$veth_b" netns "$ns_b" 2>&1) \
  || die "cannot create the veth pair $veth_a/$veth_b: $err"
ip -n "$ns_a" addr add "$addr_a/30" dev "$veth_a"
ip -n "$ns_b" addr add "$addr_b/30" dev "$veth_b"
for end in "$ns_a:$veth_a" "$ns_b:$veth_b"; do
  ip -n "${end%%:*}" link set lo up
  ip -n "${end%%:*}" link set "${end#*:}" up
done

# Shaping: HTB with rate = ceil (plain TBF gave erratic large-message results; netem is often not
# built into the kernel). Bare ACKs get a class of their own at priority 0: they never wait behind
# this end's bulk data, so the other direction keeps its clock. Both ends: all_reduce sends both ways.
warn_or_die() {
  if [ "$keep_going" -eq 1 ]; then echo "two-node: warning: $* (--keep-going: running on)" >&2; else die "$*"; fi
}
shape() {  # shape NS DEV RATE
  local ns=$1 dev=$2 rate=$3
  tc -n "$ns" qdisc add dev "$dev" root handle 1: htb default 20 &&
    tc -n "$ns" class add dev "$dev" parent 1: classid 1:1 htb rate "$rate" ceil "$rate" &&
    # quantum: one 64 KiB GSO packet per round (the default, rate/10, is clamped with a warning)
    tc -n "$ns" class add dev "$dev" parent 1:1 classid 1:10 htb rate "$rate" ceil "$rate" prio 0 quantum 65536 &&
    tc -n "$ns" class add dev "$dev" parent 1:1 classid 1:20 htb rate "$rate" ceil "$rate" prio 1 quantum 65536 &&
    # TCP (protocol 6), 20-byte IP header, IP length < 64, flags exactly ACK: a bare ACK.
    tc -n "$ns" filter add dev "$dev" parent 1: protocol ip prio 1 u32 \
      match ip protocol 6 0xff match u8 0x05 0x0f at 0 match u16 0x0000 0xffc0 at 2 \
      match u8 0x10 0xff at 33 flowid 1:10
}
if [ "$rate" != none ]; then
  shape "$ns_a" "$veth_a" "$rate" 2>"$work/tc.err" && shape "$ns_b" "$veth_b" "$rate_b" 2>>"$work/tc.err" \
    || warn_or_die "cannot shape the link with HTB: $(grep -v '^Warning' "$work/tc.err" | head -1)"
fi
for ns in "$ns_a" "$ns_b"; do
  # An idle connection would restart from a small window before every large message.
  ip netns exec "$ns" sysctl -qw net.ipv4.tcp_slow_start_after_idle=0 2>/dev/null \
    || warn_or_die "cannot set net.ipv4.tcp_slow_start_after_idle=0 in $ns"
done

# --- Open MPI across the nodes ----------------------------------------------------------------
# mpirun runs in node a; it starts node b's daemon through this agent (in place of ssh), which
# enters the node's namespace and gives it the node's host name, as a real node has its own.
agent=$work/agent.sh
cat >"$agent" <<EOF
#!/bin/sh
# plm_rsh_agent of scripts/cluster/two-node.sh (pid $id): AGENT [OPTIONS] HOST COMMAND...
while [ \$# -gt 0 ]; do case \$1 in -*) shift ;; *) break ;; esac; done
host=\$1
shift
case \$host in
  $addr_a|$node_a) ns=$ns_a name=$node_a ;;
  $addr_b|$node_b) ns=$ns_b name=$node_b ;;
  *) echo "two-node agent: unknown host '\$host'" >&2; exit 255 ;;
esac
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$name && \$*"
EOF
chmod +x "$agent"

echo "two-node: $node_a ($ns_a, $addr_a) <-> $node_b ($ns_b, $addr_b), link ${rate}$([ "$rate_b" = "$rate" ] || echo " (node b sends at $rate_b)")," \
     "$ranks_per_node ranks per node" >&2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# DTS_NODE would name both nodes alike (node a's ranks inherit mpirun's environment).
unset DTS_NODE
ip netns exec "$ns_a" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$node_a" \
  "$mpirun" -np $((2 * ranks_per_node)) --host "$addr_a:$ranks_per_node,$addr_b:$ranks_per_node" \
  --mca plm_rsh_agent "$agent" --mca orte_tmpdir_base "$work" \
  --mca btl tcp,self,vader --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet" \
  --bind-to none --oversubscribe --mca mpi_yield_when_idle 1 \
  -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM -x PATH \
  ${LD_LIBRARY_PATH:+-x LD_LIBRARY_PATH} \
  "$@" &
mpirun_pid=$!
# wait, unlike a foreground command, returns as soon as a trapped signal arrives.
wait "$mpirun_pid" || exit_code=$?
mpirun_pid=""
exit "$exit_code"

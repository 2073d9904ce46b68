#!/usr/bin/env bash
# Test of the two-node fixture (ctest cluster_two_node_test, label cluster): dtsuite through
# scripts/cluster/two-node.sh must see 2 nodes of 2 ranks, and the fixture must leave no
# namespace, process or temp dir behind, after a clean run and after a SIGINT mid-run.
#   scripts/cluster/cluster_test.sh DTSUITE [MPIRUN]
# Exit 77 (ctest SKIP) where the fixture cannot run: not root, no ip/tc, no network namespaces
# or veth, or an MPI other than Open MPI (the fixture drives Open MPI's mpirun).
set -euo pipefail
# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/../test_lib.sh"

[ $# -ge 1 ] || { echo "usage: $0 DTSUITE [MPIRUN]" >&2; exit 2; }
dtsuite=$(realpath "$1")
export MPIRUN=${2:-mpirun}
fixture=$(dirname "$(realpath "$0")")/two-node.sh

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "not root (network namespaces need CAP_SYS_ADMIN)"
for tool in ip tc unshare hostname python3 "$MPIRUN"; do
  command -v "$tool" >/dev/null || skip "$tool not found (Debian: iproute2, util-linux, hostname, python3, openmpi-bin)"
done
[[ $("$MPIRUN" --version 2>&1 || true) =~ OpenRTE|Open\ MPI ]] || skip "$MPIRUN is not Open MPI's"
# Probe, in a namespace of its own, for what the fixture makes: a kernel or container without one
# of these cannot host the fixture, which is a SKIP, not a FAIL.
probe=dts-probe-$$ missing=""
ip netns add "$probe" 2>/dev/null || skip "cannot create a network namespace here"
if ! ip -n "$probe" link add dtsprobe$$a type veth peer name dtsprobe$$b 2>/dev/null; then
  missing="veth pairs"
elif ! tc -n "$probe" qdisc add dev dtsprobe$$a root handle 1: htb 2>/dev/null; then
  missing="the HTB qdisc"
elif ! tc -n "$probe" filter add dev dtsprobe$$a parent 1: protocol ip prio 1 u32 \
       match ip protocol 6 0xff flowid 1:10 2>/dev/null; then
  missing="the u32 classifier"
fi
ip netns del "$probe"
[ -z "$missing" ] || skip "no $missing here"

work=$(mktemp -d "${TMPDIR:-/tmp}/dtsuite_cluster_test.XXXXXX")
fixture_pid=""
cleanup() {
  # A fixture still running (a failed assertion, or this test stopped by ctest's timeout): TERM
  # makes it stop its job and remove its nodes; it is in a process group of its own (set -m).
  [ -z "$fixture_pid" ] || { kill -TERM "$fixture_pid" 2>/dev/null; wait "$fixture_pid" 2>/dev/null; } || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP


# Nothing of fixture PID may remain: its namespaces (dts-PID-a/b), its temp dir, or a live
# process of those it ran (PIDS; a zombie waiting for init to reap it has let go of everything).
assert_gone() {
  local pid=$1 pids=$2 left="" p
  local namespaces
  namespaces=$(ip netns list)
  grep -q "^dts-$pid-" <<<"$namespaces" && fail "namespaces left behind: $(grep "^dts-$pid-" <<<"$namespaces" | tr '\n' ' ')"
  compgen -G "${TMPDIR:-/tmp}/dts-two-node-$pid.*" >/dev/null && fail "temp dir left behind"
  for _ in $(seq 50); do
    left=""
    for p in $pids; do
      [ -r "/proc/$p/stat" ] && [ "$(cut -d' ' -f3 "/proc/$p/stat" 2>/dev/null)" != Z ] && left+=" $p"
    done
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  fail "processes left running:$left"
}

# --- 1. dtsuite across the two nodes: exit 0, and 2 nodes of 2 ranks in every row --------------
# Job control: the fixture gets its own process group, and SIGINT is not ignored in it as it
# would be for a background command of a non-interactive shell (test 2 sends one).
set -m
started=$SECONDS
# -o sum here and below: Open MPI 4.1 drops NaN in min/max (README, overflow inputs), which this test is not about.
"$fixture" --rate 1gbit --ranks-per-node 2 -- "$dtsuite" run collectives --quick -o sum --csv "$work/quick.csv" \
  >"$work/quick.out" 2>"$work/quick.err" &
fixture_pid=$!
rc=0
wait "$fixture_pid" || rc=$?
pid=$fixture_pid
fixture_pid=""
[ "$rc" -eq 0 ] || fail "two-node.sh -- dtsuite run collectives --quick exited $rc"
grep -q '^# 4 ranks on 2 node(s), 2 per node' "$work/quick.out" || fail "the run's header does not say 4 ranks on 2 nodes"
python3 - "$work/quick.csv" <<'EOF' || fail "the CSV does not say 2 nodes of 2 ranks"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
# Every collectives case runs on the whole job: world_size 4 on nodes 2 x ranks_per_node 2.
layouts = sorted({(r["world_size"], r["nodes"], r["ranks_per_node"]) for r in rows})
if not rows or layouts != [("4", "2", "2")]:
    sys.exit(f"{len(rows)} rows, (world_size, nodes, ranks_per_node) {layouts}")
failed = [r["case"] for r in rows if r["verdict"] not in ("pass", "info", "skip")]
if failed:
    sys.exit(f"{len(failed)} rows not passed, first {failed[0]}")
print(f"ok: {len(rows)} CSV rows, every one world_size 4, nodes 2, ranks_per_node 2 (host {rows[0]['host']})")
EOF
assert_gone "$pid" ""
echo "ok: clean run in $((SECONDS - started)) s, nothing of fixture $pid left"

# --- 1b. the reference algorithms across the nodes: exact checks of every collective ----------
for backend in 'hier(mpi)' 'tree(mpi)'; do
  rc=0
  "$fixture" --rate 1gbit -- "$dtsuite" run collectives --quick -o sum --backend "$backend" --csv "$work/algorithm.csv" \
    >"$work/algorithm.out" 2>"$work/algorithm.err" || rc=$?
  [ "$rc" -eq 0 ] || fail "two-node.sh -- dtsuite run collectives --quick --backend $backend exited $rc"
  grep -q '^# Failed cases : 0' "$work/algorithm.out" || fail "$backend: failed cases across the nodes"
  rm -f "$work/algorithm.csv"
  echo "ok: $backend across the two nodes: every case passed its exact checks"
done

# --- 1b'. the topology suite across the nodes: other-node pairs, and the wire's count --------
rc=0
"$fixture" --rate 1gbit -- "$dtsuite" run topology -n 3 -w 1 --p2p-bytes 1M --link-bytes 16M --link-speed 1gbit \
  --csv "$work/topology.csv" >"$work/topology.out" 2>"$work/topology.err" || rc=$?
[ "$rc" -eq 0 ] || fail "two-node.sh -- dtsuite run topology exited $rc"
python3 - "$work/topology.csv" <<'PY' || fail "the topology rows do not match the fixture"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
cfg = lambda r: dict(kv.split("=", 1) for kv in r["config"].split(";") if "=" in kv)
links = {cfg(r)["link"] for r in rows if r["metric"] == "p2p_bandwidth"}
if links != {"same-node", "other-node"}:
    sys.exit(f"pair classes {links}")
wire = [float(r["value"]) for r in rows if r["metric"] == "wire_bytes"]
# Every node's share of the 16 MiB all_reduce must cross the link at least once: a count below
# 2 x 16 MiB (two nodes) means the counters did not see the wire.
if len(wire) != 1 or wire[0] < 2 * 16 * 2**20:
    sys.exit(f"wire_bytes {wire}")
# Shaped to 1 Gbit/s, a node cannot send faster than the rate: 1.05 leaves room for HTB's burst.
util = [float(r["value"]) for r in rows if r["metric"] == "link_utilization"]
if len(util) != 2 or not all(0 < u <= 1.05 for u in util):
    sys.exit(f"link_utilization {util}")
print(f"ok: topology across the nodes: wire {wire[0]:.3g} B per call, utilization {util}")
PY

# --- 1b''. node b's link at a quarter of node a's rate: node b named, node a not --------------
# One rank a node: two ranks on this machine's CPUs are not crowded (topology suite, peers).
# Both ends shaped well below what the machine's veth carries: where node a's rate is the
# machine's, not the shaper's (at 1gbit, node a's one-way figure came out at 119, 93 and 124 MB/s
# in three runs), its iterations' spread, as the peers' noise, hid node b at half the rate in one
# of the three, and in a CI machine's run node a reached only 60 MB/s, node b's shaped rate.
# Shaped at 200mbit and 50mbit, the noise came out under 2% of node a's rate, loaded or not, so a
# factor of 4 stands well clear.
rc=0
"$fixture" --rate 200mbit --rate-b 50mbit --ranks-per-node 1 -- "$dtsuite" run topology -n 3 -w 1 --p2p-bytes 1M --link-bytes 1M \
  --csv "$work/slow-node.csv" >"$work/slow-node.out" 2>"$work/slow-node.err" || rc=$?
[ "$rc" -eq 1 ] || fail "node b sending at a quarter of the rate: exit $rc, expected 1 (a node named)"
python3 - "$work/slow-node.csv" <<'PY' || fail "the slow node is not the one named"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
cfg = lambda r: dict(kv.split("=", 1) for kv in r["config"].split(";") if "=" in kv)
send = {cfg(r)["node"]: r for r in rows if r["metric"] == "node_bandwidth" and cfg(r)["figure"] == "send"}
if send.get("dts-node-b", {}).get("verdict") != "fail" or send.get("dts-node-a", {}).get("verdict") != "pass":
    sys.exit("node send verdicts: " + str({n: (r["verdict"], r["detail"]) for n, r in send.items()}))
# Nothing else of a healthy part: a rank or pair named has node b's rank as its sender.
for r in rows:
    c = cfg(r)
    if r["verdict"] == "fail" and r["metric"] != "node_bandwidth":
        sender = c.get("src", c.get("rank", ""))
        if sender != "1":
            sys.exit(f"{r['metric']} {r['config']} named: {r['detail']}")
print("ok: " + send["dts-node-b"]["detail"])
PY

# --- 1c. a hang on the other node: named with its node, the timeout row written, exit 3 -------
rc=0
"$fixture" --rate 1gbit -- "$dtsuite" run collectives --collective all_reduce -d f32 -o sum -b 8 -e 64K -n 3 -w 1 \
  -T 3 --backend 'faulty(hang,mpi)' --fault-rank 3 --fault-after 10 --csv "$work/hang.csv" \
  >"$work/hang.out" 2>"$work/hang.err" || rc=$?
[ "$rc" -eq 3 ] || fail "a hung rank: exit $rc, expected 3"
grep -q 'ranks that did not arrive: 3 (node dts-node-b)' "$work/hang.err" || fail "the hung rank is not named with its node"
grep -q ' 3@dts-node-b outside any call' "$work/hang.err" || fail "rank 3's state is not in the diagnosis"
tail -1 "$work/hang.csv" | grep -q ',timeout,' || fail "no timeout row at the end of the CSV"
echo "ok: a hang on node b: $(grep -o 'ranks that did not arrive: [^(]*([^)]*)' "$work/hang.err")"

# --- 1d. a rank killed on the other node: named with its node, rows kept ----------------------
# Open MPI aborts a job that loses a process unless told not to; then the watchdog can say who.
# -T 10: a healthy 64 MiB all_reduce over the 1 Gbit/s link takes about 1.5 s.
OMPI_MCA_orte_abort_on_non_zero_status=0 "$fixture" --rate 1gbit -- "$dtsuite" run collectives \
  --collective all_reduce -d f32 -o sum -b 8 -e 64M -f 2 -n 3 -w 1 -T 10 --csv "$work/killed.csv" \
  >"$work/killed.out" 2>"$work/killed.err" &
fixture_pid=$!
pid=$fixture_pid
victim=""
deadline=$((SECONDS + 120))
while [ $SECONDS -lt $deadline ] && [ -z "$victim" ]; do
  if [ -s "$work/killed.csv" ] && [ "$(wc -l <"$work/killed.csv")" -gt 20 ]; then
    for p in $(ip netns pids "dts-$pid-b" 2>/dev/null); do
      [ "$(cat "/proc/$p/comm" 2>/dev/null)" = dtsuite ] && { victim=$p; break; }
    done
  fi
  sleep 0.2
done
[ -n "$victim" ] || fail "no rank of node b running after 120 s"
kill -KILL "$victim"
rc=0
wait "$pid" || rc=$?
fixture_pid=""
# 3 from the harness, or 137 (128 + SIGKILL) when Open MPI's launcher reports the killed process first.
[ "$rc" -eq 3 ] || [ "$rc" -eq 137 ] || fail "a job that lost a rank exited $rc, expected 3 or 137"
grep -q 'not answering the watchdog: gone, or stuck outside MPI): [23] (node dts-node-b)' "$work/killed.err" \
  || fail "the killed rank is not named with its node"
rows=$(($(wc -l <"$work/killed.csv") - 1))
tail -1 "$work/killed.csv" | grep -q ',timeout,' || fail "no timeout row at the end of the CSV"
assert_gone "$pid" ""
echo "ok: a rank killed on node b (exit $rc): $(grep -o 'gone, or stuck outside MPI): [^;]*' "$work/killed.err"); $rows rows kept"

# --- 2. SIGINT mid-run: exit 130, and the same clean-up ---------------------------------------
# 64 MiB all_reduces over 1 Gbit/s take about a second each: 1000 of them outlast the test.
started=$SECONDS
"$fixture" --rate 1gbit -- "$dtsuite" run collectives --collective all_reduce -d f32 -o sum -b 64M -e 64M \
  -n 1000 -w 1 -c 0 --csv "$work/interrupted.csv" >"$work/interrupted.out" 2>"$work/interrupted.err" &
fixture_pid=$!
pid=$fixture_pid
# Mid-run: ranks in both nodes, and rows already written (every rank past MPI start-up).
running="" mid_run=0
deadline=$((SECONDS + 120))
while [ $SECONDS -lt $deadline ]; do
  kill -0 "$pid" 2>/dev/null || fail "the fixture ended before it was interrupted"
  if [ -s "$work/interrupted.csv" ] && [ "$(wc -l <"$work/interrupted.csv")" -gt 1 ]; then
    running=$( { ip netns pids "dts-$pid-a"; ip netns pids "dts-$pid-b"; } 2>/dev/null | tr '\n' ' ')
    ranks_b=$(for p in $(ip netns pids "dts-$pid-b" 2>/dev/null); do cat "/proc/$p/comm" 2>/dev/null; done | grep -c dtsuite || true)
    [ "$ranks_b" -eq 2 ] && { mid_run=1; break; }
  fi
  sleep 0.2
done
[ "$mid_run" -eq 1 ] || fail "the run did not reach its first case with ranks on node b in 120 s"
kill -INT "$pid"
rc=0
wait "$pid" || rc=$?
fixture_pid=""
[ "$rc" -eq 130 ] || fail "the interrupted fixture exited $rc, expected 130 (128 + SIGINT)"
assert_gone "$pid" "$running"
echo "ok: SIGINT mid-run: exit 130 after $((SECONDS - started)) s, namespaces, temp dir and" \
     "$(wc -w <<<"$running") processes (mpirun, agent, orted, ranks) gone"

# --- 3. a bad flag: exit 2 with one line, before anything is made -----------------------------
rc=0
"$fixture" --rate fast -- true >"$work/badrate.out" 2>"$work/badrate.err" || rc=$?
[ "$rc" -eq 2 ] || fail "--rate fast exited $rc, expected 2"
[ "$(wc -l <"$work/badrate.err")" -eq 1 ] || fail "--rate fast: expected one line on stderr"
echo "ok: --rate fast: exit 2, $(cat "$work/badrate.err")"
echo "PASS"

#!/usr/bin/env bash
# Test of dtsuite under Slurm, the launcher of real clusters (ctest slurm_test, label slurm): a
# single-node Slurm (slurmctld and slurmd, no munge, no cgroups) in a temp dir on free ports,
# then `srun --mpi=pmix -n 4 --overcommit dtsuite run collectives --quick` must exit 0 with every
# CSV row saying world_size 4 (PMIx wired the 4 tasks into one job, not 4 singletons), and
# scripts/slurm/dtsuite.sbatch, submitted with sbatch, must run one job of 2 ranks.
#   scripts/slurm/slurm_test.sh DTSUITE
# Exit 77 (ctest SKIP) when not root or when slurmctld/slurmd/srun are not installed
# (Debian: slurm-wlm; scripts/bootstrap.sh installs it). The daemons and the temp dir go away
# when the test ends, also on INT, TERM or HUP.
set -euo pipefail
# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/../test_lib.sh"

[ $# -eq 1 ] || { echo "usage: $0 DTSUITE" >&2; exit 2; }
dtsuite=$(realpath "$1")
ntasks=4
node=dtsnode

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "not root (the daemons here run as root with auth/none)"
for tool in slurmctld slurmd srun sbatch sinfo squeue scancel python3; do
  command -v "$tool" >/dev/null || skip "$tool not found (Debian: apt-get install slurm-wlm python3)"
done
plugin_dir=$(dirname "$(find /usr/lib /usr/lib64 -name mpi_pmix.so -path '*slurm*' -print -quit 2>/dev/null)")
[ "$plugin_dir" != . ] || skip "Slurm's mpi_pmix plugin not found"

work=$(mktemp -d "${TMPDIR:-/tmp}/dtsuite_slurm_test.XXXXXX")
pids=()        # slurmctld, slurmd: stopped in reverse order
client_pid=""  # srun or sbatch --wait, in the background so that a signal's trap runs at once
cleaned=0
cleanup() {
  [ "$cleaned" -eq 0 ] || return 0
  cleaned=1
  trap '' INT TERM HUP   # a second Ctrl-C must not cut the clean-up short
  set +e
  [ -z "$client_pid" ] || kill -TERM "$client_pid" 2>/dev/null
  # A job outlives slurmd (its slurmstepd is a daemon of its own): cancel what our controller
  # still runs, and wait for the steps to go (each removes its socket from the spool dir).
  if [ ${#pids[@]} -gt 0 ] && kill -0 "${pids[0]}" 2>/dev/null; then
    # shellcheck disable=SC2046  # one job id per word
    scancel --full $(squeue -h -o %i 2>/dev/null) 2>/dev/null
    for _ in $(seq 100); do
      [ -z "$(squeue -h -o %i 2>/dev/null)" ] && ! compgen -G "$work/spool/${node}_*" >/dev/null && break
      sleep 0.1
    done
  fi
  [ -z "$client_pid" ] || wait "$client_pid" 2>/dev/null
  local i
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill -TERM "${pids[i]}" 2>/dev/null
    for _ in $(seq 100); do kill -0 "${pids[i]}" 2>/dev/null || break; sleep 0.1; done
    kill -0 "${pids[i]}" 2>/dev/null && kill -KILL "${pids[i]}"
    wait "${pids[i]}" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "slurm_test: interrupted, stopping Slurm" >&2; exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP


ctld_port=$(free_port)
slurmd_port=$(free_port)
[ "$slurmd_port" != "$ctld_port" ] || slurmd_port=$(free_port)

# The smallest Slurm that runs MPI jobs: no munge (auth/none, cred/none), no cgroups
# (proctrack/linuxproc, task/none), one node of 2 CPUs on the loopback; every path in $work.
mkdir -p "$work/state" "$work/spool" "$work/tmp"
cat >"$work/slurm.conf" <<EOF
ClusterName=dtsuite-test
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
PluginDir=$plugin_dir
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
TmpFS=$work/tmp
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
NodeName=$node NodeAddr=127.0.0.1 NodeHostname=$(hostname -s) CPUs=2 State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$work/slurm.conf

slurmctld -D -i -f "$SLURM_CONF" >"$work/slurmctld.err" 2>&1 &
pids+=($!)
slurmd -D -N "$node" -f "$SLURM_CONF" >"$work/slurmd.err" 2>&1 &
pids+=($!)

# Idle means both daemons are up and the controller has registered the node.
state=""
deadline=$((SECONDS + 60))
while [ $SECONDS -lt $deadline ]; do
  for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null || fail "a Slurm daemon exited at start"; done
  state=$(sinfo -h -n "$node" -o %t 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.2
done
[ "$state" = idle ] || fail "node $node not idle after 60 s (state '$state')"
echo "ok: single-node Slurm up (slurmctld :$ctld_port, slurmd :$slurmd_port), node $node idle after ${SECONDS} s"

# 4 tasks on 2 CPUs: --overcommit, and Open MPI must yield rather than spin. -o sum: Open MPI 4.1 drops NaN in min/max (README, overflow inputs), which this test is not about.
csv=$work/slurm.csv
OMPI_MCA_mpi_yield_when_idle=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  timeout 300 srun --mpi=pmix -n "$ntasks" --overcommit --time=5 "$dtsuite" run collectives --quick -o sum --csv "$csv" \
  >"$work/srun.log" 2>"$work/srun.err" &
client_pid=$!
rc=0
wait "$client_pid" || rc=$?
client_pid=""
[ "$rc" -eq 0 ] || fail "srun --mpi=pmix -n $ntasks dtsuite run collectives --quick exited $rc"
grep -m1 '^# .* ranks on' "$work/srun.log" || true
python3 - "$csv" "$ntasks" <<'EOF' || fail "the CSV does not describe one job of $ntasks ranks"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
sizes = sorted({row["world_size"] for row in rows})
if not rows or sizes != [sys.argv[2]]:
    sys.exit(f"{len(rows)} rows, world sizes {sizes}")
print(f"ok: {len(rows)} CSV rows, every one with world_size {sys.argv[2]}")
EOF

# The sbatch script, as a user submits it (DTSUITE points it at this build). One node of 2 CPUs:
# 2 tasks per node, since Slurm refuses --ntasks-per-node above a node's CPUs even with
# --overcommit; the script then exports the yield itself.
sbatch_script=$(dirname "$(realpath "$0")")/dtsuite.sbatch
rc=0
timeout 300 sbatch --wait --quiet --nodes=1 --ntasks-per-node=2 --overcommit --time=5 \
  --chdir="$work" --output="$work/sbatch.log" --export=ALL,DTSUITE="$dtsuite" \
  "$sbatch_script" run collectives --quick -o sum --collective all_reduce --csv "$work/sbatch.csv" \
  >"$work/sbatch.err" 2>&1 &
client_pid=$!
wait "$client_pid" || rc=$?
client_pid=""
[ "$rc" -eq 0 ] || fail "sbatch --wait dtsuite.sbatch exited $rc"
grep -q "^# 2 ranks on 1 node(s), 2 per node" "$work/sbatch.log" ||
  fail "the batch job's dtsuite did not run as one job of 2 ranks"
echo "ok: sbatch dtsuite.sbatch: exit 0, $(grep -m1 '^# .* ranks on' "$work/sbatch.log")"
echo "PASS"

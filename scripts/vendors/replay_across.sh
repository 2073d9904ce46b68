#!/usr/bin/env bash
# A strategy's real traffic recorded on one stack and replayed on another (docs/trace.md):
# `run equivalence --quick --strategy S --record-trace` at 4 ranks on the Open MPI build, for
# hybrid(dp=2,tp=2) (its dp and tp groups) and ps-async (asynchronous sends and receives and their
# waits), each trace checked (`trace check`), then replayed on the MPICH build under MPICH's
# launcher and over faulty(bitflip,mpi) on Open MPI.
#   scripts/vendors/replay_across.sh OPENMPI_DTSUITE MPICH_DTSUITE [OUT_DIR]
# Checks, each a line and exit 1 when it does not hold: the recording ends 0 and its trace is
# consistent; the replay on MPICH ends 0 with every checked class passing, and its CSV names
# MPICH; the replay over faulty(bitflip,mpi) ends 1 with a failed class. Prints, per operation
# class, the recorded time per call (Open MPI, inside the strategy) beside the replayed one
# (MPICH, alone).
# Environment: OPENMPI_RUN and MPICH_RUN, the launchers (default mpirun / mpiexec.mpich, 4 ranks).
set -euo pipefail
[ $# -ge 2 ] || { sed -n '7p' "$0" >&2; exit 2; }
ompi=$1 mpich=$2
out=${3:-$(mktemp -d "${TMPDIR:-/tmp}/replay-across-XXXXXX")}
mkdir -p "$out"
for b in "$ompi" "$mpich"; do [ -x "$b" ] || { echo "replay_across.sh: $b is not an executable" >&2; exit 2; }; done
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
read -r -a ompi_run <<< "${OPENMPI_RUN:-mpirun -np 4 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1}"
read -r -a mpich_run <<< "${MPICH_RUN:-mpiexec.mpich -n 4}"

expect_exit() {  # expect_exit CODE NAME COMMAND...: the command's exit code must be CODE
  local want=$1 name=$2; shift 2
  local rc=0
  "$@" >"$out/$name.log" 2>&1 || rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "replay_across.sh: $name ended with exit $rc, not $want:" >&2
    tail -5 "$out/$name.log" >&2
    exit 1
  fi
  echo "$name: exit $rc"
}
for strategy in 'hybrid(dp=2,tp=2)' ps-async; do
  name=${strategy%%(*}
  rm -rf "${out:?}/$name" "$out/$name"-*.csv
  expect_exit 0 "$name-record" "${ompi_run[@]}" "$ompi" run equivalence --quick --strategy "$strategy" \
    --record-trace "$out/$name" --csv "$out/$name-record.csv"
  expect_exit 0 "$name-check" "$ompi" trace check "$out/$name"
  "$ompi" trace stats "$out/$name" > "$out/$name-stats.txt"
  expect_exit 0 "$name-mpich" "${mpich_run[@]}" "$mpich" run replay --trace "$out/$name" -n 5 -w 1 \
    --csv "$out/$name-mpich.csv"
  expect_exit 1 "$name-faulty" "${ompi_run[@]}" "$ompi" run replay --trace "$out/$name" \
    --backend 'faulty(bitflip,mpi)' -n 1 -w 0 --csv "$out/$name-faulty.csv"
done

python3 - "$out" <<'PY'
import csv, statistics, sys
out = sys.argv[1]
failed = []
def check(ok, what):
    if not ok:
        failed.append(what)
        print("replay_across.sh: " + what, file=sys.stderr)
def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))
for name in ("hybrid", "ps-async"):
    mpich = rows(f"{out}/{name}-mpich.csv")
    faulty = rows(f"{out}/{name}-faulty.csv")
    check(any("MPICH" in r["mpi_version"] for r in mpich), f"{name}: the MPICH replay's rows do not name MPICH")
    wrong = [r for r in mpich if r["metric"] == "wrong"]
    check(wrong and all(r["verdict"] == "pass" for r in wrong), f"{name}: a checked class failed on MPICH")
    check(any(r["metric"] == "wrong" and r["verdict"] == "fail" for r in faulty),
          f"{name}: no class failed over faulty(bitflip,mpi)")
    recorded = {r["case"]: float(r["value"]) for r in mpich if r["metric"] == "recorded_time"}
    replayed = {r["case"]: float(r["value"]) for r in mpich if r["metric"] == "time"}
    both = sorted(c for c in recorded if c in replayed and recorded[c] > 0 and replayed[c] > 0)
    print(f"{name}: {len(wrong)} checked classes passed on MPICH; per class, recorded (Open MPI, in the strategy) "
          f"against replayed (MPICH, alone), us per call:")
    for c in both:
        print(f"  {c:40s} {recorded[c] * 1e6:10.2f} {replayed[c] * 1e6:10.2f}  x{replayed[c] / recorded[c]:.2f}")
    if both:
        print(f"  median replayed/recorded: {statistics.median(replayed[c] / recorded[c] for c in both):.2f}")
sys.exit(1 if failed else 0)
PY

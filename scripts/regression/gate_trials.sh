#!/usr/bin/env bash
# How often the regression gate fails an unchanged stack, and how often it catches a slowed one,
# measured on this machine (results/baselines/README.md reports the figures).
#
#   scripts/regression/gate_trials.sh --binary BUILD/harness/dtsuite --shim BUILD/scripts/libdts_slow_collective.so
#       [--old OLD_DTSUITE] [--trials 10] [--np 2] [--baselines 3] [--repeat 1]
#       [--slow MPI_Allgather:1.25:65536] [--out DIR] [-- run flags]
#
# Runs the plan (default: all_reduce, all_gather, reduce_scatter, f32 sum, 4 B to 64 MiB in
# factors of 4, no checks) TRIALS + BASELINES times unchanged and TRIALS times with one collective
# slowed by the shim (slow_collective.cpp; the stack's identity unchanged), interleaved so that
# both meet the same machine: U1 .. U<B>, then U<B+1> S1, U<B+2> S2, ... Trial k gates
#   unchanged: U<k> .. U<k+B-1> against U<k+B>        slowed: the same baselines against S<k>
# with the gate at its defaults, and the same with one baseline run (the most recent) as today's
# single-baseline gate; with --old, that binary's single-baseline gate too (it reads schema 3:
# the files are given to it without the `repetition` column). A slowed trial is caught when the
# gate fails and every flagged row is of the slowed collective. Prints one line per trial and the
# rates; the runs and every comparison stay in DIR.
# MPIRUN is the launcher (default mpirun), MPIRUN_FLAGS its flags (default: Open MPI on a small
# machine: oversubscribe, unbound, yield when idle; none for MPICH's Hydra, e.g.
# MPIRUN=mpiexec.mpich with --binary and --shim of a build against MPICH).
set -euo pipefail

usage() {
  sed -n '5,8p' "$0" >&2
  exit 2
}

binary="" shim="" old="" trials=10 np=2 baselines=3 repeat=1 slow="MPI_Allgather:1.25:65536" out=""
while [ $# -gt 0 ]; do
  case $1 in
    --binary) binary=$2; shift 2 ;;
    --shim) shim=$2; shift 2 ;;
    --old) old=$2; shift 2 ;;
    --trials) trials=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --baselines) baselines=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --slow) slow=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --) shift; break ;;
    *) usage ;;
  esac
done
[ -x "$binary" ] || { echo "gate_trials.sh: --binary must name the dtsuite binary" >&2; exit 2; }
[ -f "$shim" ] || { echo "gate_trials.sh: --shim must name libdts_slow_collective.so (the dts_slow_collective target)" >&2; exit 2; }
[ -z "$old" ] || [ -x "$old" ] || { echo "gate_trials.sh: --old $old is not an executable" >&2; exit 2; }
for v in "$trials" "$np" "$baselines" "$repeat"; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "gate_trials.sh: '$v' is not a positive integer" >&2; exit 2; }
done
[ "$baselines" -ge 1 ] || usage
out=${out:-$(mktemp -d "${TMPDIR:-/tmp}/gate-trials-XXXXXX")}
mkdir -p "$out"
plan=("$@")
[ ${#plan[@]} -gt 0 ] || plan=(collectives --collective all_reduce,all_gather,reduce_scatter -d f32 -o sum -b 4 -e 64M -f 4 -c 0)
case ${slow%%:*} in
  MPI_Allreduce) slowed_collective=all_reduce ;;
  MPI_Allgather) slowed_collective=all_gather ;;
  MPI_Reduce_scatter_block) slowed_collective=reduce_scatter ;;
  *) echo "gate_trials.sh: --slow names MPI_Allreduce, MPI_Allgather or MPI_Reduce_scatter_block" >&2; exit 2 ;;
esac

mpirun=${MPIRUN:-mpirun}
# MPICH's Hydra (mpiexec.mpich) takes neither Open MPI's flags nor its -x NAME=VALUE.
hydra=false
"$mpirun" --version 2>&1 | grep -q HYDRA && hydra=true
default_flags="--oversubscribe --bind-to none --mca mpi_yield_when_idle 1"
$hydra && default_flags=""
read -r -a launcher_flags <<< "${MPIRUN_FLAGS-$default_flags}"
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}

one_run() {  # one_run FILE [slowed]
  local env=()
  if [ "${2:-}" = slowed ]; then
    if $hydra; then
      env=(-genv LD_PRELOAD "$(realpath "$shim")" -genv DTS_SLOW_COLLECTIVE "$slow")
    else
      env=(-x LD_PRELOAD="$(realpath "$shim")" -x DTS_SLOW_COLLECTIVE="$slow")
    fi
  fi
  "$mpirun" -np "$np" "${launcher_flags[@]}" "${env[@]}" "$binary" run "${plan[@]}" --repeat "$repeat" \
    --csv "$1" >"$1.log" 2>&1 || { echo "gate_trials.sh: the run for $1 failed (see $1.log)" >&2; exit 1; }
}

echo "# $(uname -n), $(nproc) cores, $np ranks; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# plan: ${plan[*]} --repeat $repeat; slowed: $slow ($slowed_collective); $baselines baseline runs per trial"
for i in $(seq 1 "$baselines"); do one_run "$out/U$i.csv"; done
for k in $(seq 1 "$trials"); do
  one_run "$out/U$((k + baselines)).csv"
  one_run "$out/S$k.csv" slowed
done

# judge NAME BINARY FILES...: the exit code, and the collectives of the flagged rows.
judge() {
  local name=$1 bin=$2; shift 2
  set +e
  "$bin" compare "$@" --csv "$out/$name.compare.csv" >"$out/$name.compare.txt" 2>&1
  local rc=$?
  set -e
  local flagged
  flagged=$(python3 - "$out/$name.compare.csv" <<'PY'
import csv, os, sys
path = sys.argv[1]
names = set()
if os.path.exists(path):
    for row in csv.DictReader(open(path)):
        if row["verdict"] in ("REGRESSED", "MISSING"):
            names.add(row["case"].split("/")[0])
print(",".join(sorted(names)) or "-")
PY
)
  echo "$rc $flagged"
}

# The files without `repetition` (schema 3), for a binary that predates it.
schema3() {
  python3 - "$1" "$2" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
fields = [f for f in rows[0].keys() if f != "repetition"]
with open(sys.argv[2], "w", newline="") as out:
    w = csv.DictWriter(out, fields, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        r["schema_version"] = "3"
        w.writerow(r)
PY
}
if [ -n "$old" ]; then
  for f in "$out"/U*.csv "$out"/S*.csv; do
    case $f in *.v3.csv|*.compare.csv) continue ;; esac
    schema3 "$f" "${f%.csv}.v3.csv"
  done
fi

printf '# %-5s | %-22s | %-22s | %-22s | %-30s | %-30s | %-30s\n' trial "unchanged: gate" "unchanged: 1 baseline" \
  "unchanged: old" "slowed: gate" "slowed: 1 baseline" "slowed: old"
declare -A fails=() caught=()
for k in $(seq 1 "$trials"); do
  bases=()
  for b in $(seq "$k" $((k + baselines - 1))); do bases+=("$out/U$b.csv"); done
  last=${bases[-1]}
  current="$out/U$((k + baselines)).csv" slowed_run="$out/S$k.csv"
  line=()
  for which in unchanged slowed; do
    if [ "$which" = unchanged ]; then tag=u run=$current; else tag=s run=$slowed_run; fi
    for kind in gate single old; do
      [ "$kind" = old ] && [ -z "$old" ] && { line+=("-"); continue; }
      case $kind in
        gate) result=$(judge "$tag$k.gate" "$binary" "${bases[@]}" "$run") ;;
        single) result=$(judge "$tag$k.single" "$binary" "$last" "$run") ;;
        old) result=$(judge "$tag$k.old" "$old" "${last%.csv}.v3.csv" "${run%.csv}.v3.csv") ;;
      esac
      if [ "$which" = unchanged ]; then
        [ "${result%% *}" = 1 ] && fails[$kind]=$(( ${fails[$kind]:-0} + 1 ))
      else
        [ "$result" = "1 $slowed_collective" ] && caught[$kind]=$(( ${caught[$kind]:-0} + 1 ))
      fi
      line+=("$result")
    done
  done
  printf '  %-5s | %-22s | %-22s | %-22s | %-30s | %-30s | %-30s\n' "$k" "${line[@]}"
done
echo "# (each cell: the gate's exit code, then the collectives it flagged)"
for kind in gate single old; do
  [ "$kind" = old ] && [ -z "$old" ] && continue
  echo "# $kind: unchanged runs failed ${fails[$kind]:-0} of $trials; slowed runs caught (only $slowed_collective flagged) ${caught[$kind]:-0} of $trials"
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg); runs and comparisons in $out"

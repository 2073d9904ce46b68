#!/usr/bin/env bash
# How often the regression gate fails an unchanged stack, and how often it catches a slowed one,
# measured on this machine (results/baselines/README.md reports the figures).
#
#   scripts/regression/gate_trials.sh --binary BUILD/harness/dtsuite --shim BUILD/scripts/libdts_slow_collective.so
#       [--old OLD_DTSUITE] [--trials 10] [--np 2] [--baselines 10] [--repeat 1] [--ab ROUNDS]
#       [--only-ab] [--confirm ROUNDS] [--detectable 25] [--slow MPI_Allgather:1.25:65536] [--out DIR]
#       [-- run flags]
#
# Runs the plan (default: all_reduce, all_gather, reduce_scatter, f32 sum, 4 B to 64 MiB in
# factors of 4, no checks) TRIALS + BASELINES times unchanged and TRIALS times with one collective
# slowed by the shim (slow_collective.cpp; the stack's identity unchanged), interleaved so that
# both meet the same machine: U1 .. U<B>, then U<B+1> S1, U<B+2> S2, ... Trial k gates
#   unchanged: U<k> .. U<k+B-1> against U<k+B>        slowed: the same baselines against S<k>
# with the gate at its defaults (README's protocol: 10 baseline runs, timing verdicts from 7), and
# the same with one baseline run (the most recent) at --min-runs 1, the runs' own intervals; with
# --old, that binary's single-baseline gate too (it reads schema 3: the files are given to it
# without the `repetition` column). A slowed trial is caught when the gate fails and every flagged
# row is of the slowed collective. Per slowed trial also, of the slowed collective's judged rows
# from the slowdown's size up: those whose `detectable` is at most DETECTABLE percent and how many
# of them were flagged (all must be, 9 trials in 10), and how many of the rest were `ok` (none may
# be: each is `blind` or flagged).
# With --ab ROUNDS, then TRIALS interleaved A/B sessions (`dtsuite ab`) of ROUNDS rounds with B
# slowed, and TRIALS with A and B the same stack: a slowed session finds the slowdown when some row
# of B is worse and every such row is of the slowed collective; an unchanged one fails when it
# calls any row different. --only-ab runs the A/B sessions alone.
# With --confirm ROUNDS, README's two-step protocol: after each gate trial that fails, or that
# names interleaved A/B runs as the cure of a blind row, an A/B session of ROUNDS rounds (A the
# unchanged stack, B the trial's: unchanged or slowed) decides; the protocol fails the trial when
# that session finds B worse (exit 1), and catches the slowdown when B is worse in the slowed
# collective only.
# Prints one line per trial and the rates; the runs and every comparison stay in DIR.
# MPIRUN is the launcher (default mpirun), MPIRUN_FLAGS its flags (default: Open MPI on a small
# machine: oversubscribe, unbound, yield when idle; none for MPICH's Hydra, e.g.
# MPIRUN=mpiexec.mpich with --binary and --shim of a build against MPICH).
set -euo pipefail

usage() {
  sed -n '5,8p' "$0" >&2
  exit 2
}

binary="" shim="" old="" trials=10 np=2 baselines=10 repeat=1 ab=0 confirm=0 only_ab=false detectable=25 slow="MPI_Allgather:1.25:65536" out=""
while [ $# -gt 0 ]; do
  case $1 in
    --binary) binary=$2; shift 2 ;;
    --shim) shim=$2; shift 2 ;;
    --old) old=$2; shift 2 ;;
    --trials) trials=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --baselines) baselines=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --ab) ab=$2; shift 2 ;;
    --only-ab) only_ab=true; shift ;;
    --confirm) confirm=$2; shift 2 ;;
    --detectable) detectable=$2; shift 2 ;;
    --slow) slow=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --) shift; break ;;
    *) usage ;;
  esac
done
[ -x "$binary" ] || { echo "gate_trials.sh: --binary must name the dtsuite binary" >&2; exit 2; }
[ -f "$shim" ] || { echo "gate_trials.sh: --shim must name libdts_slow_collective.so (the dts_slow_collective target)" >&2; exit 2; }
[ -z "$old" ] || [ -x "$old" ] || { echo "gate_trials.sh: --old $old is not an executable" >&2; exit 2; }
[[ $ab =~ ^[0-9]+$ ]] && [ "$ab" -ne 1 ] || { echo "gate_trials.sh: --ab takes the rounds of a session (2 or more)" >&2; exit 2; }
[[ $confirm =~ ^[0-9]+$ ]] && [ "$confirm" -ne 1 ] || { echo "gate_trials.sh: --confirm takes the rounds of a session (2 or more)" >&2; exit 2; }
! $only_ab || [ "$ab" -gt 0 ] || { echo "gate_trials.sh: --only-ab needs --ab ROUNDS" >&2; exit 2; }
[[ $detectable =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "gate_trials.sh: --detectable takes a percentage" >&2; exit 2; }
for v in "$trials" "$np" "$baselines" "$repeat"; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "gate_trials.sh: '$v' is not a positive integer" >&2; exit 2; }
done
[ "$baselines" -ge 1 ] || usage
out=${out:-$(mktemp -d "${TMPDIR:-/tmp}/gate-trials-XXXXXX")}
mkdir -p "$out"
plan=("$@")
[ ${#plan[@]} -gt 0 ] || plan=(collectives --collective all_reduce,all_gather,reduce_scatter -d f32 -o sum -b 4 -e 64M -f 4 -c 0)
slow_bytes=${slow##*:}
[[ $slow_bytes =~ ^[0-9]+$ ]] || { echo "gate_trials.sh: --slow NAME:FACTOR:MIN_BYTES" >&2; exit 2; }
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

# Interleaved A/B sessions of `dtsuite ab`: the sides' commands, one session.
side() {  # side [slowed]: the command of one side, {csv} where the round's file goes
  local env=()
  if [ "${1:-}" = slowed ]; then
    if $hydra; then env=(-genv LD_PRELOAD "$(realpath "$shim")" -genv DTS_SLOW_COLLECTIVE "$slow")
    else env=(-x "LD_PRELOAD=$(realpath "$shim")" -x "DTS_SLOW_COLLECTIVE=$slow"); fi
  fi
  printf '%q ' "$mpirun" -np "$np" "${launcher_flags[@]}" "${env[@]}" "$binary" run "${plan[@]}" --repeat "$repeat"
  printf -- '--csv {csv}'
}
session() {  # session ROUNDS NAME [slowed]: "<exit> <collectives of B's worse rows> <different rows>"
  local rounds=$1 name=$2 rc=0
  "$binary" ab --a "$(side)" --b "$(side "${3:-}")" --rounds "$rounds" --out "$out/$name" --csv "$out/$name.csv" \
    >"$out/$name.txt" 2>&1 || rc=$?
  [ "$rc" -le 1 ] || { echo "gate_trials.sh: the A/B session $name failed (see $out/$name.txt)" >&2; exit 1; }
  python3 - "$out/$name.csv" "$rc" <<'PY'
import csv, sys
worse, different = set(), 0
for row in csv.DictReader(open(sys.argv[1])):
    if row["verdict"] == "different":
        different += 1
        if row["b_worse"] == "1":
            worse.add(row["case"].split("/")[0])
print(sys.argv[2], ",".join(sorted(worse)) or "-", different)
PY
}

echo "# $(uname -n), $(nproc) cores, $np ranks; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# plan: ${plan[*]} --repeat $repeat; slowed: $slow ($slowed_collective); $baselines baseline runs per trial"
if ! $only_ab; then
for i in $(seq 1 "$baselines"); do one_run "$out/U$i.csv"; done
for k in $(seq 1 "$trials"); do
  one_run "$out/U$((k + baselines)).csv"
  one_run "$out/S$k.csv" slowed
done

# judge NAME BINARY FILES...: the exit code, the collectives of the flagged rows, and (for the
# slowed collective's judged rows from the slowdown's size up) "rows D/C/K": D with detectable at
# most DETECTABLE percent, C of them flagged, K of the others `ok` (neither flagged nor blind).
judge() {
  local name=$1 bin=$2; shift 2
  set +e
  "$bin" compare "$@" --csv "$out/$name.compare.csv" >"$out/$name.compare.txt" 2>&1
  local rc=$?
  set -e
  local flagged
  flagged=$(python3 - "$out/$name.compare.csv" "$slowed_collective" "$slow_bytes" "$detectable" <<'PY'
import csv, os, sys
path, slowed, from_bytes, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
names = set()
det = caught = ok = 0
if os.path.exists(path):
    for row in csv.DictReader(open(path)):
        if row["verdict"] in ("REGRESSED", "MISSING"):
            names.add(row["case"].split("/")[0])
        if row["op"] != slowed or not row["bytes"] or int(row["bytes"]) < from_bytes or row["verdict"] == "-":
            continue
        d = row.get("detectable_percent", "")
        if d not in ("", "inf") and float(d) <= limit:
            det += 1
            caught += row["verdict"] == "REGRESSED"
        elif row["verdict"] == "ok":
            ok += 1
print((",".join(sorted(names)) or "-") + f" rows {det}/{caught}/{ok}")
PY
)
  echo "$rc $flagged"
}

# The files without `repetition` and `mpi_config` (schema 3), for a binary that predates them.
schema3() {
  python3 - "$1" "$2" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
fields = [f for f in rows[0].keys() if f not in ("repetition", "mpi_config")]
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

printf '# %-5s | %-30s | %-30s | %-22s | %-42s | %-42s | %-30s\n' trial "unchanged: gate" "unchanged: 1 baseline" \
  "unchanged: old" "slowed: gate" "slowed: 1 baseline" "slowed: old"
declare -A fails=() caught=() all_rows=() none_ok=() gate_rc=()
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
        single) result=$(judge "$tag$k.single" "$binary" "$last" "$run" --min-runs 1) ;;
        old) result=$(judge "$tag$k.old" "$old" "${last%.csv}.v3.csv" "${run%.csv}.v3.csv") ;;
      esac
      read -r rc flagged _ rows <<< "$result"
      [ "$kind" = gate ] && gate_rc[$tag$k]=$rc
      if [ "$which" = unchanged ]; then
        [ "$rc" = 1 ] && fails[$kind]=$(( ${fails[$kind]:-0} + 1 ))
      else
        [ "$rc" = 1 ] && [ "$flagged" = "$slowed_collective" ] && caught[$kind]=$(( ${caught[$kind]:-0} + 1 ))
        IFS=/ read -r det got okay <<< "$rows"
        [ "$det" = "$got" ] && all_rows[$kind]=$(( ${all_rows[$kind]:-0} + 1 ))
        [ "$okay" = 0 ] && none_ok[$kind]=$(( ${none_ok[$kind]:-0} + 1 ))
      fi
      line+=("$result")
    done
  done
  printf '  %-5s | %-30s | %-30s | %-22s | %-42s | %-42s | %-30s\n' "$k" "${line[@]}"
done
echo "# (each cell: the gate's exit code, the collectives it flagged, and rows D/C/K of $slowed_collective from $slow_bytes B up:"
echo "#  D with detectable <= $detectable%, C of them flagged, K of the others ok, neither flagged nor blind;"
echo "#  with D = 0, \"every row flagged\" below holds because no row could see the slowdown)"
for kind in gate single old; do
  [ "$kind" = old ] && [ -z "$old" ] && continue
  echo "# $kind: unchanged runs failed ${fails[$kind]:-0} of $trials; slowed runs caught (only $slowed_collective flagged)" \
    "${caught[$kind]:-0} of $trials; every row with detectable <= $detectable% flagged in ${all_rows[$kind]:-0} of $trials;" \
    "no other row of it ok in ${none_ok[$kind]:-0} of $trials"
done

# README's protocol, step two: an A/B session decides a trial whose gate failed or named
# interleaving as a blind row's cure; the others keep the gate's verdict.
if [ "$confirm" -gt 0 ]; then
  echo "# confirm: an A/B session of $confirm rounds (A unchanged, B the trial's stack) after each gate trial that" \
    "failed or named interleaved A/B runs as a cure"
  confirm_fails=0 confirm_caught=0 confirm_sessions=0
  for k in $(seq 1 "$trials"); do
    cells=()
    for which in unchanged slowed; do
      if [ "$which" = unchanged ]; then tag=u side_b=""; else tag=s side_b=slowed; fi
      rc=${gate_rc[$tag$k]}
      if [ "$rc" = 1 ] || grep -q 'cure: interleaved A/B' "$out/$tag$k.gate.compare.csv"; then
        confirm_sessions=$((confirm_sessions + 1))
        result=$(session "$confirm" "confirm-$tag$k" $side_b) || exit 1
        read -r rc worse _ <<< "$result"
        cells+=("gate ${gate_rc[$tag$k]}, A/B exit $rc, B worse in $worse")
      else
        worse=-
        cells+=("gate $rc, no A/B needed")
      fi
      if [ "$which" = unchanged ]; then
        [ "$rc" = 1 ] && confirm_fails=$((confirm_fails + 1))
      else
        [ "$rc" = 1 ] && [ "$worse" = "$slowed_collective" ] && confirm_caught=$((confirm_caught + 1))
      fi
    done
    printf '  %-5s | unchanged: %-40s | slowed: %-40s\n' "$k" "${cells[@]}"
  done
  echo "# gate then A/B: unchanged runs failed $confirm_fails of $trials; slowed runs caught (only $slowed_collective" \
    "worse) $confirm_caught of $trials; $confirm_sessions A/B sessions of $((2 * trials)) trials"
fi
fi

# Interleaved A/B sessions: TRIALS with B slowed, TRIALS with A and B the same, alternating.
if [ "$ab" -gt 0 ]; then
  echo "# A/B: $trials sessions of $ab rounds with B slowed, $trials with A and B the same (alternating)"
  ab_fails=0 ab_found=0
  for k in $(seq 1 "$trials"); do
    unchanged_result=$(session "$ab" "ab-u$k") || exit 1
    slowed_result=$(session "$ab" "ab-s$k" slowed) || exit 1
    read -r urc uworse udiff <<< "$unchanged_result"
    read -r src sworse sdiff <<< "$slowed_result"
    [ "$udiff" -gt 0 ] && ab_fails=$((ab_fails + 1))
    [ "$src" = 1 ] && [ "$sworse" = "$slowed_collective" ] && ab_found=$((ab_found + 1))
    printf '  %-5s | unchanged: exit %s, %s rows different | slowed: exit %s, B worse in %s, %s rows different\n' \
      "$k" "$urc" "$udiff" "$src" "$sworse" "$sdiff"
  done
  echo "# ab: unchanged sessions calling a row different $ab_fails of $trials; slowed sessions finding it (only" \
    "$slowed_collective worse) $ab_found of $trials"
fi
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg); runs and comparisons in $out"

#!/usr/bin/env bash
# How often a rank lost mid-run is reported (README, *When a run cannot finish*): a long
# convergence run (3 ranks, --epochs EPOCHS, no scan), with --csv, --junit and --prom, rank VICTIM
# killed with SIGKILL T seconds in, for each strategy and T, RUNS times. A run counts as reported
# when all three outputs say so: the CSV has a `fail` row naming "rank VICTIM", the JUnit file an
# <error type="rank_lost"> and is a closed document, the Prometheus textfile
# dtsuite_cases_failed >= 1 ("named"; "unnamed" when the row says a rank was lost but rank 0's
# MPI calls held it from asking which). Not counted: a run with no rank VICTIM running at T (not
# started yet, or over), one killed before rank 0 opened its outputs (no CSV: nothing can say
# anything), and one whose outputs were whole and closed before the kill (every case done, the
# console's closing summary printed with no failure: the rank died in the job's teardown).
#
#   scripts/bench/lost_rank_matrix.sh --binary BUILD/harness/dtsuite [--runs 10] [--epochs 400]
#       [--times "1 2 4 8"] [--strategies "ddp gossip ps-sync"] [--victim 2] [--out DIR]
#
# Prints one markdown row per strategy and time: runs killed, named, unnamed, missed, not counted,
# and the exit codes seen.
# MPIRUN is the launcher (default mpirun, Open MPI's: it ends the others with SIGTERM, SIGKILL a
# second later), MPIRUN_FLAGS its flags (default: oversubscribed, unbound, yield when idle).
set -euo pipefail
usage() {
  sed -n '13,14p' "$0" >&2
  exit 2
}
binary="" runs=10 epochs=400 times="1 2 4 8" strategies="ddp gossip ps-sync" victim=2 out=""
while [ $# -gt 0 ]; do
  case $1 in
    --binary) binary=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --times) times=$2; shift 2 ;;
    --strategies) strategies=$2; shift 2 ;;
    --victim) victim=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) usage ;;
  esac
done
[ -x "$binary" ] || { echo "lost_rank_matrix.sh: --binary must name the dtsuite binary" >&2; exit 2; }
for v in "$runs" "$epochs"; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "lost_rank_matrix.sh: '$v' is not a positive integer" >&2; exit 2; }
done
[[ $victim =~ ^[12]$ ]] || { echo "lost_rank_matrix.sh: --victim is rank 1 or 2 of the 3" >&2; exit 2; }
out=${out:-$(mktemp -d)}
mkdir -p "$out"
mpirun=${MPIRUN:-mpirun}
read -r -a flags <<<"${MPIRUN_FLAGS:---oversubscribe --bind-to none --mca mpi_yield_when_idle 1}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# Whether process $1 descends from process $2 (its parents, read from /proc).
descends_from() {
  local pid=$1 parent
  while [ "$pid" -gt 1 ]; do
    parent=$(awk '{ print $4 }' "/proc/$pid/stat" 2>/dev/null) || return 1
    [ -n "$parent" ] || return 1
    [ "$parent" -eq "$2" ] && return 0
    pid=$parent
  done
  return 1
}

# The pid of world rank $2 among the launcher $1's descendants (its environment says its rank):
# never a rank of another job on the machine that runs the same binary.
rank_pid() {
  local pid
  for pid in $(pgrep -f -- "$binary run convergence" || true); do
    descends_from "$pid" "$1" || continue
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
      echo "$pid"
      return
    fi
  done
}

reported() {  # $1: the run's file prefix
  local csv=$1.csv xml=$1.xml prom=$1.prom
  [ -f "$csv" ] && [ -f "$xml" ] && [ -f "$prom" ] || return 1
  grep -q ",fail,.*rank $victim" "$csv" || python3 - "$csv" "$victim" <<'PY' || return 1
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
sys.exit(0 if any(r["verdict"] == "fail" and f"rank {sys.argv[2]}" in r["detail"] for r in rows) else 1)
PY
  grep -q '<error type="rank_lost"' "$xml" && grep -q '</testsuites>' "$xml" || return 1
  awk '$1 == "dtsuite_cases_failed" && $2 >= 1 { found = 1 } END { exit !found }' "$prom"
}

reported_unnamed() {  # $1: the run's file prefix; a fail row "a rank of the job was lost"
  grep -q 'a rank of the job was lost' "$1.csv" 2>/dev/null && grep -q '<error type="rank_lost"' "$1.xml" &&
    awk '$1 == "dtsuite_cases_failed" && $2 >= 1 { found = 1 } END { exit !found }' "$1.prom"
}

closed_before() {  # $1: the run's file prefix
  grep -q '^# Failed cases : 0$' "$1.out" &&
    awk '$1 == "dtsuite_cases_planned" { p = $2 } $1 == "dtsuite_cases_done" { d = $2 } END { exit !(p > 0 && p == d) }' "$1.prom"
}

echo "| strategy | kill at | killed | named | unnamed | missed | not counted | exit codes |"
echo "|---|---|---|---|---|---|---|---|"
for strategy in $strategies; do
  for t in $times; do
    ok=0 unnamed=0 killed=0 over=0 codes=""
    for run in $(seq 1 "$runs"); do
      prefix=$out/$strategy-$t-$run
      rm -f "$prefix".{csv,xml,prom,out,err}
      "$mpirun" -np 3 "${flags[@]}" "$binary" run convergence --strategy "$strategy" --epochs "$epochs" \
        --scan-scales none --csv "$prefix.csv" --junit "$prefix.xml" --prom "$prefix.prom" \
        >"$prefix.out" 2>"$prefix.err" &
      launcher=$!
      sleep "$t"
      pid=$(rank_pid "$launcher" "$victim")
      if [ -z "$pid" ]; then
        wait "$launcher" || true
        over=$((over + 1))
        continue
      fi
      kill -KILL "$pid" 2>/dev/null || true
      code=0
      wait "$launcher" || code=$?
      if reported "$prefix"; then
        ok=$((ok + 1))
      elif reported_unnamed "$prefix"; then
        unnamed=$((unnamed + 1))
      elif [ ! -s "$prefix.csv" ] || closed_before "$prefix"; then
        over=$((over + 1))
        continue  # not counted: neither in killed nor among the exit codes
      else
        echo "not reported: $prefix" >&2
      fi
      killed=$((killed + 1))
      codes="$codes $code"
    done
    echo "| $strategy | ${t} s | $killed | $ok | $unnamed | $((killed - ok - unnamed)) | $over | $(tr ' ' '\n' <<<"$codes" | sort | uniq -c | awk 'NF == 2 { printf "%s%s x%s", sep, $2, $1; sep = ", " }') |"
  done
done

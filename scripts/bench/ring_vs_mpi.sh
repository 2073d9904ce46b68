#!/usr/bin/env bash
# The ring's busbw against the MPI library's, one table over several rank counts: runs
# bench/ring_vs_mpi (mpi and ring(mpi) alternately in one job, median per size) once per rank
# count on this machine and joins the rows, with the load average before and after (a shared
# machine's load is part of the result).
#   scripts/bench/ring_vs_mpi.sh [--binary PATH] [--ranks "2 3 4"] [-- ring_vs_mpi flags...]
#   e.g. scripts/bench/ring_vs_mpi.sh --binary build/bench/ring_vs_mpi -- -b 1M -e 64M -f 2 --rounds 7
# MPIRUN is the launcher (default: mpirun); MPIRUN_FLAGS its flags (default, for Open MPI:
# unbound, oversubscribing, yielding when idle, so that rank counts above the cores run and every
# rank count runs alike). Exit code: 0; 2 for a usage error; else the first failing job's.
set -euo pipefail

usage() {
  echo "usage: $0 [--binary PATH] [--ranks \"2 3 4\"] [-- ring_vs_mpi flags...]" >&2
  exit 2
}

binary=build/bench/ring_vs_mpi
ranks="2 3 4"
while [ $# -gt 0 ]; do
  case $1 in
    --binary) [ $# -ge 2 ] || usage; binary=$2; shift 2 ;;
    --ranks) [ $# -ge 2 ] || usage; ranks=$2; shift 2 ;;
    --) shift; break ;;
    *) usage ;;
  esac
done
[ -x "$binary" ] || { echo "ring_vs_mpi.sh: $binary is not an executable (build the ring_vs_mpi target)" >&2; exit 2; }
for n in $ranks; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "ring_vs_mpi.sh: --ranks takes positive integers, not '$n'" >&2; exit 2; }
done

mpirun=${MPIRUN:-mpirun}
read -r -a launcher_flags <<< "${MPIRUN_FLAGS---oversubscribe --bind-to none --mca mpi_yield_when_idle 1}"
echo "# $(uname -n), $(nproc) cores; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
header=()
for n in $ranks; do
  "$mpirun" -np "$n" "${launcher_flags[@]}" "$binary" "${header[@]}" "$@"
  header=(--no-header)
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

#!/usr/bin/env bash
# The trade of idleness against staleness, measured on this stack (README, *Stragglers*): ddp,
# ps-sync, ps-async, ps-ssp, ps-backup and gossip on 4 ranks, the parameter servers as 1 server +
# 3 workers and as 2 + 2, each without and with a compute straggler on rank 3.
#
#   scripts/bench/straggler_table.sh --binary BUILD/harness/dtsuite [--runs 3] [--factor 4]
#       [--width 512] [--steps 30] [--out DIR]
#
# Per run and straggler setting: the equivalence suite (f32, sgd, STEPS steps of 24 rows per
# worker) gives idle_time per rank (step time not spent computing), staleness (mean, p95, max) and
# the checks; the scaling suite (weak, 24 rows per rank, STEPS timed steps) gives throughput at 4
# ranks, timed free-running where the ranks may run ahead of a slow one; the convergence suite
# (digits, every strategy on the 4 ranks, no scan) gives each base run's samples and seconds to
# its target accuracy and its final accuracy (a second table). Prints one markdown row
# per strategy, split and setting: medians over the runs (throughput, idle per rank in ms, the
# staleness figures), and the spread of the throughput over the runs. Every file stays in DIR.
# MPIRUN is the launcher (default mpirun), MPIRUN_FLAGS its flags (default: Open MPI on a small
# machine: oversubscribe, unbound, yield when idle).
set -euo pipefail
usage() {
  sed -n '6,7p' "$0" >&2
  exit 2
}
binary="" runs=3 factor=4 width=512 steps=30 out=""
while [ $# -gt 0 ]; do
  case $1 in
    --binary) binary=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --factor) factor=$2; shift 2 ;;
    --width) width=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) usage ;;
  esac
done
[ -x "$binary" ] || { echo "straggler_table.sh: --binary must name the dtsuite binary" >&2; exit 2; }
for v in "$runs" "$width" "$steps"; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "straggler_table.sh: '$v' is not a positive integer" >&2; exit 2; }
done
[[ $factor =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "straggler_table.sh: --factor takes a number above 1" >&2; exit 2; }
out=${out:-$(mktemp -d "${TMPDIR:-/tmp}/straggler-table-XXXXXX")}
mkdir -p "$out"
mpirun=${MPIRUN:-mpirun}
read -r -a launcher_flags <<< "${MPIRUN_FLAGS---oversubscribe --bind-to none --mca mpi_yield_when_idle 1}"
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}

model=(--width "$width" --layers 3)
for run in $(seq 1 "$runs"); do
  for servers in 1 2; do
    strategies="ps-sync(servers=$servers),ps-async(servers=$servers),ps-ssp(servers=$servers),ps-backup(servers=$servers)"
    [ "$servers" = 1 ] && strategies="ddp(dp=4),gossip(dp=4),$strategies"
    for setting in none "3:$factor"; do
      slow=()
      [ "$setting" = none ] || slow=(--straggler "$setting")
      name="r$run-s$servers-${setting/:/x}"
      "$mpirun" "${launcher_flags[@]}" -np 4 "$binary" run equivalence --strategy "$strategies" "${model[@]}" -d f32 \
        --optimizer sgd --steps "$steps" --batch 72 "${slow[@]}" --csv "$out/$name.eq.csv" > "$out/$name.eq.log" 2>&1 ||
        { echo "straggler_table.sh: equivalence failed, see $out/$name.eq.log" >&2; exit 1; }
      "$mpirun" "${launcher_flags[@]}" -np 4 "$binary" run scaling --strategy "$strategies" "${model[@]}" \
        --scaling-mode weak --rank-batch 24 -n "$steps" "${slow[@]}" --csv "$out/$name.scaling.csv" > "$out/$name.scaling.log" 2>&1 ||
        { echo "straggler_table.sh: scaling failed, see $out/$name.scaling.log" >&2; exit 1; }
      "$mpirun" "${launcher_flags[@]}" -np 4 "$binary" run convergence --strategy "$strategies" --group-ranks 4 \
        --scan-scales none "${slow[@]}" --csv "$out/$name.convergence.csv" > "$out/$name.convergence.log" 2>&1 ||
        { echo "straggler_table.sh: convergence failed, see $out/$name.convergence.log" >&2; exit 1; }
      echo "run $run, $servers server(s), straggler $setting: done" >&2
    done
  done
done

python3 - "$out" <<'PY'
import csv, glob, os, re, statistics, sys
out = sys.argv[1]
rows = {}  # (strategy, split, setting) -> {'tput': [], 'idle': {rank: []}, 'st': [[mean, p95, max]], 'checks': n failed}
def key_of(r, setting):
    s = r['strategy']
    m = re.search(r'servers=(\d+)', r['config'])
    split = f"{m.group(1)}+{int(r['world_size']) - int(m.group(1))}" if m else "4 ranks"
    return (s, split, setting)
for path in sorted(glob.glob(os.path.join(out, 'r*-s*-*.eq.csv'))):
    setting = 'none' if path.endswith('-none.eq.csv') else 'rank 3 x' + path.rsplit('x', 1)[1].split('.eq')[0]
    for r in csv.DictReader(open(path)):
        if r['world_size'] != '4':
            continue
        e = rows.setdefault(key_of(r, setting), {'tput': [], 'idle': {}, 'st': [], 'failed': 0})
        if r['verdict'] == 'fail':
            e['failed'] += 1
        if r['metric'] == 'idle_time':
            rank = int(re.search(r'rank=(\d+)', r['config']).group(1))
            mean = float(re.search(r'mean ([0-9.e+-]+) s', r['detail']).group(1))
            e['idle'].setdefault(rank, []).append(mean)
        if r['metric'] == 'staleness':
            m = re.search(r'mean ([0-9.e+-]+), p95 ([0-9.e+-]+), max ([0-9.e+-]+)', r['detail'])
            e['st'].append([float(x) for x in m.groups()])
for path in sorted(glob.glob(os.path.join(out, 'r*-s*-*.scaling.csv'))):
    setting = 'none' if path.endswith('-none.scaling.csv') else 'rank 3 x' + path.rsplit('x', 1)[1].split('.scaling')[0]
    for r in csv.DictReader(open(path)):
        if r['metric'] == 'throughput' and r['world_size'] == '4' and r['verdict'] != 'skip':
            rows.setdefault(key_of(r, setting), {'tput': [], 'idle': {}, 'st': [], 'failed': 0})['tput'].append(float(r['value']))
med = statistics.median
print('| strategy | ranks | straggler | throughput, rows/s (min–max) | idle per step, ms: rank 0 / 1 / 2 / 3 | staleness mean / p95 / max | failed checks |')
print('|---|---|---|---|---|---|---|')
order = ['ddp', 'gossip', 'ps-sync', 'ps-async', 'ps-ssp', 'ps-backup']
for (s, split, setting) in sorted(rows, key=lambda k: (k[1] != '4 ranks', k[1], order.index(k[0]) if k[0] in order else 9, k[2] != 'none')):
    e = rows[(s, split, setting)]
    t = f"{med(e['tput']):,.0f} ({min(e['tput']):,.0f}–{max(e['tput']):,.0f})" if e['tput'] else '—'
    idle = ' / '.join(f"{1e3 * med(e['idle'][r]):.2f}" for r in sorted(e['idle'])) or '—'
    st = ' / '.join(f"{med([x[i] for x in e['st']]):.3g}" for i in range(3)) if e['st'] else '—'
    print(f"| {s} | {split} | {setting} | {t} | {idle} | {st} | {e['failed']} |")

# The convergence suite's base run (digits, B = 16, eta = 0.02, 10 epochs) per strategy, split and
# setting: samples and seconds to the target accuracy, the final accuracy, failed checks.
conv = {}
for path in sorted(glob.glob(os.path.join(out, 'r*-s*-*.convergence.csv'))):
    setting = 'none' if path.endswith('-none.convergence.csv') else 'rank 3 x' + path.rsplit('x', 1)[1].split('.convergence')[0]
    for r in csv.DictReader(open(path)):
        m = re.search(r'layout=s(\d+)-w(\d+)', r['config'])
        split = f"{m.group(1)}+{m.group(2)}" if m else "4 ranks"
        e = conv.setdefault((r['strategy'], split, setting), {'samples': [], 'seconds': [], 'final': [], 'failed': 0, 'missed': 0})
        if r['metric'] == 'check' and r['verdict'] == 'fail':  # a rule the run missed is not a broken stack
            e['failed'] += 1
        if 'run=base;' not in r['config'] + ';':
            continue
        if r['metric'] == 'samples_to_target':
            if r['verdict'] == 'skip':
                e['missed'] += 1
            else:
                e['samples'].append(float(r['value']))
        if r['metric'] == 'time_to_target' and r['verdict'] != 'skip':
            e['seconds'].append(float(r['value']))
        if r['metric'] == 'final_accuracy':
            e['final'].append(float(r['value']))
print()
print('| strategy | ranks | straggler | samples to target (min–max) | seconds to target, ms (min–max) | final accuracy | runs that missed it | failed checks |')
print('|---|---|---|---|---|---|---|---|')
for (s, split, setting) in sorted(conv, key=lambda k: (k[1] != '4 ranks', k[1], order.index(k[0]) if k[0] in order else 9, k[2] != 'none')):
    e = conv[(s, split, setting)]
    smp = f"{med(e['samples']):,.0f} ({min(e['samples']):,.0f}–{max(e['samples']):,.0f})" if e['samples'] else '—'
    sec = f"{1e3 * med(e['seconds']):.1f} ({1e3 * min(e['seconds']):.1f}–{1e3 * max(e['seconds']):.1f})" if e['seconds'] else '—'
    fin = f"{med(e['final']):.3f}" if e['final'] else '—'
    print(f"| {s} | {split} | {setting} | {smp} | {sec} | {fin} | {e['missed']} | {e['failed']} |")
PY
echo "straggler_table.sh: the runs are in $out" >&2

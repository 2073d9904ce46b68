#!/usr/bin/env bash
# Open MPI, MPICH and Gloo side by side: the collectives suite (--quick) at 2 ranks on a build
# against each MPI, each started by its own library's launcher, and over Gloo (--backend gloo, the
# Open MPI build, which bootstraps Gloo over MPI; docs/gloo.md), then one report of all three.
#   scripts/vendors/side_by_side.sh OPENMPI_DTSUITE MPICH_DTSUITE [OUT_DIR]
# Checks, each a line and exit 1 when it does not hold: every run saw 2 ranks (not 2 jobs of one:
# the world_size column), each CSV names its library (mpi_version; backend_version for Gloo), the
# report labels the three stacks; each run ends with exit 0 under the shipped expectation files
# (results/expectations/: all three drop NaN in min or max on this machine's Debian versions, which
# is xfail there, cited), so a deviation they do not name, or one they name that no longer shows,
# fails. Prints the cases whose outcome differs between the stacks and the busbw of each at every
# size, then runs interleaved A/B sessions (`dtsuite ab`, AB_ROUNDS rounds, default 4): Open MPI
# against MPICH, and Open MPI against Gloo (all_reduce, all_gather, reduce_scatter), and prints
# their counts; their tables and reports (ab*.txt, ab*.html) say which rows differ, with intervals.
# Environment: OPENMPI_RUN and MPICH_RUN, the launchers (default mpirun / mpiexec.mpich).
set -euo pipefail
[ $# -ge 2 ] || { sed -n '4p' "$0" >&2; exit 2; }
ompi=$1 mpich=$2
out=${3:-$(mktemp -d "${TMPDIR:-/tmp}/side-by-side-XXXXXX")}
mkdir -p "$out"
for b in "$ompi" "$mpich"; do [ -x "$b" ] || { echo "side_by_side.sh: $b is not an executable" >&2; exit 2; }; done
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
read -r -a ompi_run <<< "${OPENMPI_RUN:-mpirun -np 2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1}"
read -r -a mpich_run <<< "${MPICH_RUN:-mpiexec.mpich -n 2}"

expectations="$(cd "$(dirname "$0")/../../results/expectations" && pwd)"
run() {  # run NAME LAUNCHER... BINARY; BACKEND (default mpi) is the stack under test
  local name=$1; shift
  local rc=0
  "$@" run collectives --backend "${BACKEND:-mpi}" --quick --csv "$out/$name.csv" --expect "$expectations/openmpi-4.1.toml" \
    --expect "$expectations/mpich-4.0.toml" --expect "$expectations/gloo-0.5.toml" >"$out/$name.log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "side_by_side.sh: the $name run ended with exit $rc:" >&2
    tail -5 "$out/$name.log" >&2
    exit 1
  fi
  echo "$name: exit $rc ($(grep -c '' "$out/$name.csv") CSV lines)"
}
run openmpi "${ompi_run[@]}" "$ompi"
run mpich "${mpich_run[@]}" "$mpich"
# Gloo where the Open MPI build has it (libgloo-dev at configure time; `dtsuite list` names it).
csvs=("$out/openmpi.csv" "$out/mpich.csv")
have_gloo=0
if "$ompi" list | grep -q '^  gloo,'; then
  have_gloo=1
  BACKEND=gloo run gloo "${ompi_run[@]}" "$ompi"
  csvs+=("$out/gloo.csv")
else
  echo "gloo: not in this build (configured without libgloo-dev): its run and A/B session are left out"
fi
"$ompi" report "${csvs[@]}" -o "$out/side_by_side.html" >/dev/null

python3 - "$out" "$have_gloo" <<'PY'
import csv, re, sys, statistics
out, have_gloo = sys.argv[1], sys.argv[2] == "1"
failed = []
def check(ok, what):
    if not ok:
        failed.append(what)
        print("side_by_side.sh: " + what, file=sys.stderr)
rows = {}
stacks = (("openmpi", "Open MPI", "mpi_version"), ("mpich", "MPICH", "mpi_version"))
if have_gloo:
    stacks += (("gloo", "Gloo", "backend_version"),)
for name, library, column in stacks:
    rows[name] = list(csv.DictReader(open(f"{out}/{name}.csv")))
    sizes = {r["world_size"] for r in rows[name] if r["suite"] == "collectives"}
    check(sizes == {"2"}, f"{name}: world sizes {sorted(sizes)}, expected 2 (one job of 2 ranks)")
    versions = {r[column] for r in rows[name]}
    check(len(versions) == 1 and next(iter(versions)).startswith(library),
          f"{name}: {column} {sorted(versions)}, expected {library}'s")
html = open(f"{out}/side_by_side.html").read()
for label in ("| Open MPI v", "| MPICH ") + (("gloo | ",) if have_gloo else ()):
    check(label in html, f"the report does not label a stack '... {label}'")

def outcomes(name):
    worst = {}
    order = {"timeout": 5, "xpass": 4, "fail": 3, "xfail": 2, "skip": 1, "pass": 0, "info": -1}
    for r in rows[name]:
        if r["verdict"] == "info" or r["suite"] == "expect":
            continue
        key = r["case"]
        if key not in worst or order[r["verdict"]] > order[worst[key][0]]:
            worst[key] = (r["verdict"], r["detail"])
    return worst
names = {name: library for name, library, _ in stacks}
for a, b in (("openmpi", "mpich"),) + ((("openmpi", "gloo"),) if have_gloo else ()):
    o, m = outcomes(a), outcomes(b)
    differ = sorted(k for k in set(o) & set(m) if o[k][0] != m[k][0])
    print(f"cases whose outcome differs, {names[a]} / {names[b]}: {len(differ)} of {len(set(o) & set(m))}")
    groups = {}  # (verdicts, the detail's words before its first number) -> cases
    for k in differ:
        detail = (o[k] if o[k][0] != "pass" else m[k])[1]
        groups.setdefault((o[k][0], m[k][0], re.split(r"[0-9]", detail, 1)[0][:100]), []).append(k)
    for (vo, vm, detail), cases in sorted(groups.items(), key=lambda g: -len(g[1])):
        print(f"  {len(cases)} case(s), {names[a]} {vo}, {names[b]} {vm}: {detail}... e.g. {', '.join(cases[:3])}")
def busbw(name):
    v = {}
    for r in rows[name]:
        if r["metric"] == "busbw" and r["placement"] == "out_of_place" and int(r["bytes"] or 0) > 0:
            v.setdefault((r["op"], int(r["bytes"])), []).append(float(r["value"]))
    return {k: statistics.median(x) for k, x in v.items()}
bw = {name: busbw(name) for name, _, _ in stacks}
print("busbw GB/s, " + " / ".join(library for _, library, _ in stacks) + ", out of place (median over dtypes and reduction ops; - where a stack has none):")
for op in sorted({k[0] for k in bw["openmpi"]}):
    cells = []
    for (o2, b) in sorted(bw["openmpi"]):
        if o2 != op:
            continue
        cells.append(f"{b}: " + "/".join(f"{bw[n][(op, b)] / 1e9:.2f}" if (op, b) in bw[n] else "-" for n, _, _ in stacks))
    print(f"  {op}: " + ", ".join(cells))
sys.exit(1 if failed else 0)
PY

# Interleaved A/B sessions: the same small plan in alternating rounds, each row judged on its
# paired rounds (different, same, unknown), with a report of both. Exit 1 of `ab` (B slower
# somewhere) is a finding, not a failure of this script.
#   ab_session STEM TITLE SIDE_A SIDE_B: writes STEM.csv, STEM.html and STEM.txt in $out
ab_session() {
  local stem=$1 title=$2 rc=0 rounds_dir
  rounds_dir=$(mktemp -d "$out/$stem-rounds-XXXXXX")  # a new, empty folder: ab never writes over a session
  "$ompi" ab --a "$3" --b "$4" --rounds "${AB_ROUNDS:-4}" \
    --out "$rounds_dir" --csv "$out/$stem.csv" --report "$out/$stem.html" >"$out/$stem.txt" 2>&1 || rc=$?
  if [ "$rc" -gt 1 ] || ! grep -q "A/B: interleaved rounds" "$out/$stem.html"; then
    echo "side_by_side.sh: the A/B session $title ended with exit $rc:" >&2
    tail -5 "$out/$stem.txt" >&2
    exit 1
  fi
  echo "A/B, $title, ${AB_ROUNDS:-4} rounds: $(grep '^# [0-9]* rows:' "$out/$stem.txt" | cut -c3-)"
}
plan=(run collectives --collective all_reduce,all_gather -d f32 -o sum -b 1K -e 1M -f 8 -c 0 -n 20)
ab_session ab "Open MPI (A) vs MPICH (B)" "$(printf '%q ' "${ompi_run[@]}" "$ompi" "${plan[@]}")--csv {csv}" \
  "$(printf '%q ' "${mpich_run[@]}" "$mpich" "${plan[@]}")--csv {csv}"
# Open MPI (A) against Gloo (B) on the Open MPI build: the three collectives a data-parallel step
# spends its time in.
if [ "$have_gloo" = 1 ]; then
  plan=(run collectives --collective all_reduce,all_gather,reduce_scatter -d f32 -o sum -b 1K -e 1M -f 8 -c 0 -n 20)
  ab_session ab_gloo "Open MPI (A) vs Gloo (B)" "$(printf '%q ' "${ompi_run[@]}" "$ompi" "${plan[@]}")--csv {csv}" \
    "$(printf '%q ' "${ompi_run[@]}" "$ompi" "${plan[@]}")--backend gloo --csv {csv}"
fi
echo "side_by_side.sh: ok; runs, logs and reports in $out"

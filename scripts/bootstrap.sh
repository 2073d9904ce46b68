#!/usr/bin/env bash
# dtsuite set-up on Debian 12: installs the Debian packages that are missing, configures and
# builds, then either runs the default suite on local ranks (`run`, the default) or every test
# (`test`). Used by README's two commands and by CI (.ci/run), which adds the two checking
# builds: `sanitize` (ASan + UBSan build in build-asan, its unit and MPI tests) and `fuzz` (clang
# build in build-fuzz, each libFuzzer target of fuzz/ for FUZZ_SECONDS); and `vendors`: a build
# against MPICH in build-mpich beside the Open MPI one in build/ (after `test` or `run`), the
# collectives suite on both and over Gloo at 2 ranks (scripts/vendors/side_by_side.sh), and a
# strategy's trace recorded on Open MPI and replayed on MPICH (scripts/vendors/replay_across.sh).
#   bash scripts/bootstrap.sh [run|test|sanitize|fuzz|vendors] [extra dtsuite run flags...]
# Environment: BUILD_DIR (default build, build-asan, build-fuzz, build-mpich by mode), NP (ranks for `run`,
# default 4), CI=true (warnings become errors), DTS_CMAKE_FLAGS (extra configure flags),
# FUZZ_SECONDS (fuzz: seconds per target, default 60).
set -euo pipefail
mode=${1:-run}
shift || true
cd "$(dirname "$0")/.."
np=${NP:-4}
# Per mode: build directory, configure flags, what to build. The checking builds leave CUDA out:
# its runtime and ASan's shadow memory do not mix, and the GPU tests skip here anyway.
mode_flags=()
build_target=all
case "$mode" in
  sanitize)
    build_dir=${BUILD_DIR:-build-asan}
    mode_flags=(-DDTS_SANITIZE=address,undefined -DDTS_WITH_CUDA=OFF -DDTS_WITH_NCCL=OFF)
    ;;
  fuzz)
    build_dir=${BUILD_DIR:-build-fuzz}
    mode_flags=(-DCMAKE_CXX_COMPILER=clang++-16 -DDTS_FUZZ=ON -DDTS_FUZZ_SECONDS="${FUZZ_SECONDS:-60}"
                -DDTS_WITH_CUDA=OFF -DDTS_WITH_NCCL=OFF -DDTS_WITH_GLOO=OFF)  # no fuzz target runs a backend
    build_target=fuzz_targets
    ;;
  vendors)
    build_dir=${BUILD_DIR:-build-mpich}
    mode_flags=(-DMPI_CXX_COMPILER=/usr/bin/mpicxx.mpich -DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.mpich
                -DDTS_WITH_CUDA=OFF -DDTS_WITH_NCCL=OFF)
    build_target=dtsuite
    ;;
  *)
    build_dir=${BUILD_DIR:-build}
    ;;
esac

packages=(build-essential cmake pkg-config openmpi-bin libopenmpi-dev libcli11-dev libgtest-dev libgmock-dev
          libbenchmark-dev libfccp-dev libexpat1-dev zlib1g-dev libopenblas-dev prometheus-cpp-dev libtomlplusplus-dev gnuplot-nox chromium
          prometheus prometheus-pushgateway curl python3
          iproute2 slurm-wlm   # the two-node fixture (scripts/cluster), a single-node Slurm (scripts/slurm)
          mpich libmpich-dev   # a second MPI beside Open MPI (which stays the default mpicxx/mpirun)
          libgloo-dev          # Gloo, PyTorch's CPU collectives: the gloo backend
          nlohmann-json3-dev   # JSON: traces (trace/) and the importers of PyTorch and Kineto traces
          clang-16 libclang-rt-16-dev)  # fuzz/: clang 16 (14 lacks std::source_location), libFuzzer, sanitizer runtimes
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

werror=OFF
[ "${CI:-}" = "true" ] && werror=ON
echo "== configuring ($build_dir, warnings as errors: $werror)"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DDTS_WERROR=$werror "${mode_flags[@]}" ${DTS_CMAKE_FLAGS:-} \
  >"$build_dir.configure.log" 2>&1 || { cat "$build_dir.configure.log"; exit 1; }
grep -E "^-- dtsuite" "$build_dir.configure.log" || true
# The sanitize stage builds only what its tests run: the unit and MPI tests, and the end-to-end
# tests labelled `sanitize` (dts_add_e2e_test SANITIZE: what reads user input end to end), which
# run the dtsuite binary built with the sanitizers too.
sanitize_tests=(-L 'unit|mpi' -LE e2e)
sanitize_e2e_tests=(-L sanitize)
build_targets=("$build_target")
if [ "$mode" = sanitize ]; then
  # The binaries behind the selected tests: a test's name is its target's (NAME_npN for an MPI
  # test, NAME_corpus for a corpus replay), and a test run through a launcher or script names the
  # binary among its arguments; whatever of that is a target of this build is built, and dtsuite
  # when an end-to-end test is among them.
  mapfile -t build_targets < <(python3 - "$build_dir" \
      <(ctest --test-dir "$build_dir" -N "${sanitize_tests[@]}" --show-only=json-v1) \
      <(cmake --build "$build_dir" --target help) \
      <(ctest --test-dir "$build_dir" -N "${sanitize_e2e_tests[@]}" --show-only=json-v1) <<'PY'
import json, os, re, sys
build = os.path.realpath(sys.argv[1]) + "/"
tests = json.load(open(sys.argv[2]))["tests"]
targets = {line[4:].split()[0] for line in open(sys.argv[3]) if line.startswith("... ")}
e2e = json.load(open(sys.argv[4]))["tests"]
wanted = {"dtsuite"} if e2e else set()
for t in tests + e2e:
    wanted.add(t["name"])
    wanted.add(re.sub(r"_(np[0-9]+|corpus)$", "", t["name"]))
    for arg in t.get("command", []):
        if os.path.isabs(arg) and os.path.realpath(arg).startswith(build):
            wanted.add(os.path.basename(arg))
print("\n".join(sorted(wanted & targets)))
PY
  )
fi
echo "== building (${#build_targets[@]} targets: ${build_targets[*]})"
cmake --build "$build_dir" -j"$(nproc)" --target "${build_targets[@]}"

# Open MPI refuses to run as root unless told; ranks may outnumber cores on small machines.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
case "$mode" in
  run)
    # The stacks' known deviations, cited (results/expectations/): each entry applies to its own
    # library only, so every file goes to every run; a deviation they do not name still fails it.
    echo "== dtsuite run on $np local ranks (known deviations: results/expectations/)"
    exec mpirun -np "$np" --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \
      "$build_dir/harness/dtsuite" run --expect results/expectations/openmpi-4.1.toml \
      --expect results/expectations/mpich-4.0.toml --expect results/expectations/gloo-0.5.toml "$@"
    ;;
  test)
    echo "== ctest"
    exec ctest --test-dir "$build_dir" --output-on-failure -j"$(nproc)" --timeout 900
    ;;
  sanitize)
    # Unit and MPI tests (the seed corpora's replays among them). The end-to-end tests drive the
    # same code through the binary; they take 4 minutes in the Release build, several times that
    # under ASan, past what CI can spend: only those labelled sanitize run here.
    echo "== ctest under ASan + UBSan (labels unit, mpi; not e2e)"
    ctest --test-dir "$build_dir" --output-on-failure -j"$(nproc)" --timeout 1800 "${sanitize_tests[@]}"
    echo "== ctest under ASan + UBSan (end-to-end tests labelled sanitize: the binary on user input)"
    exec ctest --test-dir "$build_dir" --output-on-failure -j"$(nproc)" --timeout 1800 "${sanitize_e2e_tests[@]}" \
      --no-tests=error
    ;;
  vendors)
    [ -x build/harness/dtsuite ] || { echo "bootstrap.sh vendors: needs the Open MPI build in build/ (run the test stage first)" >&2; exit 2; }
    echo "== Open MPI (build/), MPICH ($build_dir) and Gloo side by side, 2 ranks; a strategy's trace recorded on"
    echo "   Open MPI and replayed on MPICH, 4 ranks: ctest vendors_side_by_side_test vendors_replay_test"
    DTS_MPICH_DTSUITE="$(realpath "$build_dir/harness/dtsuite")" \
      exec ctest --test-dir build --output-on-failure --verbose -R '^vendors_(side_by_side|replay)_test$' --no-tests=error
    ;;
  fuzz)
    echo "== fuzzing each target for ${FUZZ_SECONDS:-60} s (crash reproducers: $build_dir/fuzz/*.work/artifacts)"
    exec ctest --test-dir "$build_dir" --output-on-failure -j"$(nproc)" -L fuzz
    ;;
  *)
    echo "usage: scripts/bootstrap.sh [run|test|sanitize|fuzz|vendors]" >&2
    exit 2
    ;;
esac

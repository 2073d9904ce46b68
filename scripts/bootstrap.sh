#!/usr/bin/env bash
# dtsuite set-up on Debian 12: installs the Debian packages that are missing, configures and
# builds, then either runs the default suite on local ranks (`run`, the default) or every test
# (`test`). Used by README's two commands and by CI (.ci/run).
#   bash scripts/bootstrap.sh [run|test] [extra dtsuite run flags...]
# Environment: BUILD_DIR (default build), NP (ranks for `run`, default 4), CI=true (warnings
# become errors), DTS_CMAKE_FLAGS (extra configure flags).
set -euo pipefail
mode=${1:-run}
shift || true
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
np=${NP:-4}

packages=(build-essential cmake pkg-config openmpi-bin libopenmpi-dev libcli11-dev libgtest-dev libgmock-dev
          libbenchmark-dev libfccp-dev libexpat1-dev zlib1g-dev libopenblas-dev prometheus-cpp-dev libtomlplusplus-dev gnuplot-nox chromium
          prometheus prometheus-pushgateway curl python3
          iproute2 slurm-wlm)  # the two-node fixture (scripts/cluster), a single-node Slurm (scripts/slurm)
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
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DDTS_WERROR=$werror ${DTS_CMAKE_FLAGS:-} >"$build_dir.configure.log" 2>&1 \
  || { cat "$build_dir.configure.log"; exit 1; }
grep -E "^-- dtsuite" "$build_dir.configure.log" || true
echo "== building"
cmake --build "$build_dir" -j"$(nproc)"

# Open MPI refuses to run as root unless told; ranks may outnumber cores on small machines.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
case "$mode" in
  run)
    echo "== dtsuite run on $np local ranks"
    exec mpirun -np "$np" --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \
      "$build_dir/harness/dtsuite" run "$@"
    ;;
  test)
    echo "== ctest"
    exec ctest --test-dir "$build_dir" --output-on-failure -j"$(nproc)" --timeout 900
    ;;
  *)
    echo "usage: scripts/bootstrap.sh [run|test]" >&2
    exit 2
    ;;
esac

#!/usr/bin/env bash
# The device checks of a lent GPU machine (one GPU, CUDA and NCCL, no MPI), in the order issue
# 36 asks for them, each bounded in time, its output and CSV under OUT: the CUDA tests, every
# strategy over nccl at 1 rank and over staged(mpi) at 2-4 ranks sharing the GPU (f32 and bf16;
# f64 SKIPs), the convergence and scaling suites on the device, the topology suite on device
# memory, the straggler's delay kernel, a new nccl communicator after an abort, fp8 collectives
# on nccl, and the host check's time of a 1 GiB result. Needs the pack of scripts/gpu/pack.sh
# (carried as gpu-pack.tar.xz, or unpacked).
#   bash scripts/gpu/device_checks.sh [PACK (gpu-pack.tar.xz)] [OUT ($OUT, else device-checks)]
# One line per check goes to OUT/summary.txt: its name, exit code and seconds.
set -uo pipefail
pack=${1:-gpu-pack.tar.xz}
out=${2:-${OUT:-device-checks}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ -f "$pack" ]; then
  root=$(mktemp -d)
  tar -C "$root" -xJf "$pack"
  pack=$root/gpu-pack
fi
# The GPU machine's own CUDA runtime, cuBLAS and NCCL: a CUDA toolkit's lib64 or Python's
# nvidia-* packages, wherever they are.
gpu_libs=""
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  found=$(find /usr/local /usr/lib /opt /root -name "$lib" 2>/dev/null | head -n 1)
  [ -n "$found" ] && gpu_libs="$gpu_libs:$(dirname "$found")"
done
export DTS_GPU_LIBS=${gpu_libs#:}
# shellcheck source=/dev/null
source "$pack/env.sh"
launch=(mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1)
small="--steps 3 --batch 23 --layers 3 --width 13 --input 7 --classes 5"
summary=$out/summary.txt
: >"$summary"

# check NAME SECONDS COMMAND...: runs it with a time limit, its output in OUT/NAME.log.
check() {
  local name=$1 limit=$2 start=$SECONDS rc
  shift 2
  timeout --signal=TERM --kill-after=10 "$limit" "$@" >"$out/$name.log" 2>&1
  rc=$?
  echo "$name rc=$rc $((SECONDS - start))s" | tee -a "$summary"
}

check gpu 20 nvidia-smi -q
for test in buffer_cuda_test cuda_kernels_cuda_test mlp_cuda_test; do
  check "$test" 120 "$pack/bin/$test"
done
# Every strategy with a one-rank layout over nccl, the default model (f32, bf16; f64 SKIPs).
check nccl_equivalence_1 240 dtsuite run equivalence --backend nccl --csv "$out/nccl_equivalence_1.csv"
# 2-4 ranks sharing the GPU through staged(mpi): every strategy with a layout on them.
for np in 2 3 4; do
  check "staged_equivalence_$np" 240 "${launch[@]}" -np "$np" dtsuite run equivalence --device cuda \
    --backend 'staged(mpi)' $small --csv "$out/staged_equivalence_$np.csv"
done
check staged_convergence_4 240 "${launch[@]}" -np 4 dtsuite run convergence --device cuda --backend 'staged(mpi)' \
  --strategy ddp,zero1,zero2,zero3,tp,hybrid,ps-sync,ps-async,ps-ssp,ps-backup,gossip --group-ranks 4 \
  --scan-scales none --csv "$out/staged_convergence_4.csv"
check staged_scaling_4 240 "${launch[@]}" -np 4 dtsuite run scaling --device cuda --backend 'staged(mpi)' --quick \
  --csv "$out/staged_scaling_4.csv"
check staged_topology_2 120 "${launch[@]}" -np 2 dtsuite run topology --device cuda --backend 'staged(mpi)' \
  --p2p-sweep 1K:4M --csv "$out/staged_topology_2.csv"
# The straggler's delay kernel: rank 1's compute against its peer's, factors 2 and 3.
for factor in 2 3; do
  check "straggler_$factor" 120 "${launch[@]}" -np 2 dtsuite run equivalence --device cuda --backend 'staged(mpi)' \
    --strategy 'ddp(dp=2),zero3(dp=2)' -d f32 --optimizer sgd --layers 4 --width 1024 --input 1024 --batch 256 \
    --steps 20 --straggler "1:$factor" --csv "$out/straggler_$factor.csv"
done
# NCCL aborts a communicator at its first error: the next case must get a new one.
check nccl_abort 120 dtsuite run collectives --backend 'faulty(abort,nccl)' -b 8 -e 64K -d f32 -o sum \
  --collective all_reduce,broadcast --csv "$out/nccl_abort.csv"
# fp8 on nccl at 1 rank (every op; a second GPU would be needed for the reductions' arithmetic).
check nccl_fp8 120 dtsuite run collectives --backend nccl -d f8e4m3,f8e5m2 -b 8 -e 1M --csv "$out/nccl_fp8.csv"
# The host check of a 1 GiB f32 result after the GPU's all_reduce: max_ulp's detail has its seconds.
check nccl_check_1g 300 dtsuite run collectives --backend nccl -b 1G -e 1G -d f32 -o sum --collective all_reduce \
  -n 5 -w 1 --csv "$out/nccl_check_1g.csv"
echo "device_checks.sh: $(grep -c ' rc=0 ' "$summary") of $(wc -l <"$summary") checks ended 0; logs in $out"

#!/usr/bin/env bash
# Packs what a lent GPU machine lacks for the device checks (scripts/gpu/device_checks.sh): that
# machine has a GPU, CUDA and NCCL, but no MPI and no package registry. The pack holds the
# dtsuite binary and the CUDA test binaries of BUILD_DIR, Open MPI's launcher (orterun, orted),
# its libraries, plugins and help files in a tree that Open MPI relocates to (OPAL_PREFIX), PMIx's
# plugins and help files, and every shared library those need that is not the C/C++ runtime, CUDA
# or NCCL (the GPU machine brings its own). The run's env.sh sets the paths.
#   bash scripts/gpu/pack.sh [BUILD_DIR (build)] [OUT (gpu-pack)]
# Then carry OUT (the device tool's carry list) and run scripts/gpu/device_checks.sh OUT there.
set -euo pipefail
build=${1:-build}
out=${2:-gpu-pack}
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
ompi_lib=/usr/lib/$multiarch/openmpi/lib
ompi_plugins=$ompi_lib/openmpi3
pmix_root=/usr/lib/$multiarch/pmix2
[ -x "$build/harness/dtsuite" ] || { echo "pack.sh: no $build/harness/dtsuite: build first" >&2; exit 2; }
[ -x /usr/bin/orterun ] && [ -d "$ompi_plugins" ] || { echo "pack.sh: needs Debian's Open MPI (openmpi-bin)" >&2; exit 2; }
rm -rf "$out"
mkdir -p "$out"/{bin,lib,ompi/bin,ompi/share,ompi/etc,"ompi/lib/$multiarch/openmpi/lib",pmix2/lib}

# The binaries: dtsuite and the tests that need a GPU (they take no build paths; the end-to-end
# tests do, so device_checks.sh runs dtsuite itself).
cp "$build/harness/dtsuite" "$out/bin/"
for test in core/buffer_cuda_test kernels/cuda/cuda_kernels_cuda_test strategies/mlp_cuda_test; do
  [ -x "$build/$test" ] && cp "$build/$test" "$out/bin/"
done
cp /usr/bin/orterun /usr/bin/orted "$out/ompi/bin/"
ln -s orterun "$out/ompi/bin/mpirun"
cp -r "$ompi_plugins" "$out/ompi/lib/$multiarch/openmpi/lib/"
# Ranks of one machine talk through shared memory (btl vader, pml ob1): the network transports'
# plugins (UCX, libfabric, PSM, verbs) and OpenSHMEM's would only bring their libraries along.
find "$out/ompi/lib/$multiarch/openmpi/lib/openmpi3" \( -name '*ucx*' -o -name '*ofi*' -o -name '*psm*' \
  -o -name '*openib*' -o -name '*verbs*' -o -name 'mca_mtl_*' -o -name 'mca_spml_*' -o -name 'mca_sshmem_*' \
  -o -name 'mca_memheap_*' -o -name 'mca_scoll_*' -o -name 'mca_atomic_*' -o -name 'mca_btl_usnic*' \) -delete
cp -r /usr/share/openmpi "$out/ompi/share/"
cp /etc/openmpi/openmpi-mca-params.conf "$out/ompi/etc/"
cp -r "$pmix_root/lib/pmix" "$out/pmix2/lib/"
[ -d "$pmix_root/share" ] && cp -r "$pmix_root/share" "$out/pmix2/"

# The shared libraries everything above loads, less what the GPU machine has of its own: the C and
# C++ runtimes (its glibc is at least as new: the binaries were linked against this one's symbols
# only where they must), CUDA's and NCCL's.
mapfile -t objects < <(find "$out/bin" "$out/ompi/bin" "$out/ompi/lib" "$out/pmix2/lib" -type f \( -perm -u+x -o -name '*.so*' \))
keep() {
  case "$(basename "$1")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) return 1 ;;
    libcuda.so*|libcudart.so*|libcublas*.so*|libnccl.so*|libnvidia*|libnvrtc*) return 1 ;;
  esac
  return 0
}
for object in "${objects[@]}"; do
  ldd "$object" 2>/dev/null | awk '/=> \// { print $3 }'
done | sort -u | while read -r lib; do
  if keep "$lib"; then cp -L "$lib" "$out/lib/"; fi
done

cat > "$out/env.sh" <<ENV
# Sourced by scripts/gpu/device_checks.sh: Open MPI and PMIx relocated into this pack, its
# libraries first, then the GPU machine's CUDA and NCCL (DTS_GPU_LIBS: folders of libcudart,
# libcublas, libnccl; found by device_checks.sh).
pack=\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)
export OPAL_PREFIX=\$pack/ompi
export OPAL_LIBDIR=\$pack/ompi/lib/$multiarch/openmpi/lib
export OPAL_PKGLIBDIR=\$pack/ompi/lib/$multiarch/openmpi/lib/openmpi3
export OPAL_PKGDATADIR=\$pack/ompi/share/openmpi
export OPAL_SYSCONFDIR=\$pack/ompi/etc
export OMPI_MCA_mca_base_component_path=\$OPAL_PKGLIBDIR
export PMIX_PREFIX=\$pack/pmix2
export PMIX_MCA_mca_base_component_path=\$pack/pmix2/lib/pmix
export PATH=\$pack/ompi/bin:\$pack/bin:\$PATH
export LD_LIBRARY_PATH=\$pack/lib\${DTS_GPU_LIBS:+:\$DTS_GPU_LIBS}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
# One machine, shared memory between ranks; as root, as the lent machine runs.
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ENV
# One archive for the device tool's carry (64 MiB in all): OpenBLAS alone is 36 MB unpacked.
tar -C "$(dirname "$out")" -cJf "$out.tar.xz" "$(basename "$out")"
echo "pack.sh: $(du -sh "$out" | cut -f1) in $out, $(du -h "$out.tar.xz" | cut -f1) as $out.tar.xz"

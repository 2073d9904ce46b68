# Detects CUDA and NCCL once (AUTO: on when found) and sets DTS_HAVE_CUDA / DTS_HAVE_NCCL.
# The build never needs a GPU: CUDA code is compiled and linked; tests skip when no device answers.

# The GPUs users run: A100 (80), H100 and H200 (90), and each newer major architecture this
# toolkit compiles (100: B200, 120: RTX 50 / RTX PRO), as machine code; the newest also as PTX,
# which the driver compiles for GPUs that come after. An architecture the toolkit no longer
# compiles is left out (the toolkit's own list, nvcc --list-gpu-arch), so a newer toolkit never
# fails the build. Override with -DCMAKE_CUDA_ARCHITECTURES=...
function(dts_default_cuda_architectures out)
  execute_process(COMMAND "${CMAKE_CUDA_COMPILER}" --list-gpu-arch OUTPUT_VARIABLE listed
                  RESULT_VARIABLE failed ERROR_QUIET)
  set(wanted 80 90 100 120)
  set(chosen "")
  foreach(arch IN LISTS wanted)
    if(failed OR listed MATCHES "compute_${arch}([^0-9]|$)")
      list(APPEND chosen ${arch})
    endif()
  endforeach()
  if(failed)
    set(chosen 80 90)  # an nvcc too old to list its architectures compiles these two
  endif()
  list(POP_BACK chosen newest)
  list(TRANSFORM chosen APPEND "-real")
  list(APPEND chosen "${newest}")  # the newest: machine code and PTX
  set(${out} "${chosen}" PARENT_SCOPE)
  message(STATUS "CUDA architectures: ${chosen} (override with -DCMAKE_CUDA_ARCHITECTURES=...)")
endfunction()
set(DTS_HAVE_CUDA OFF)
set(DTS_HAVE_NCCL OFF)

if(NOT DTS_WITH_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)  # the toolkit's standard install location
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      dts_default_cuda_architectures(CMAKE_CUDA_ARCHITECTURES)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit)
    if(CUDAToolkit_FOUND)
      set(DTS_HAVE_CUDA ON)
    endif()
  endif()
  if(DTS_WITH_CUDA STREQUAL "ON" AND NOT DTS_HAVE_CUDA)
    message(FATAL_ERROR "DTS_WITH_CUDA=ON but no CUDA toolkit was found")
  endif()
endif()

if(DTS_HAVE_CUDA AND NOT DTS_WITH_NCCL STREQUAL "OFF")
  find_package(NCCL)
  if(NCCL_FOUND)
    set(DTS_HAVE_NCCL ON)
  endif()
endif()
if(DTS_WITH_NCCL STREQUAL "ON" AND NOT DTS_HAVE_NCCL)
  message(FATAL_ERROR "DTS_WITH_NCCL=ON but NCCL (or the CUDA toolkit it needs) was not found")
endif()

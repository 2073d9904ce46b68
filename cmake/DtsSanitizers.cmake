# Sanitizer and fuzzing builds (README, "Sanitizers and fuzzing"). Included before any target is
# declared, so the flags below reach every dtsuite target (libraries, tests, the binary, benches).
#   -DDTS_SANITIZE=address,undefined   ASan + UBSan; any -fsanitize= list the compiler accepts
#   -DDTS_FUZZ=ON                       clang only: the libFuzzer targets in fuzz/, with the rest
#                                       of the code built for coverage (implies address,undefined)
set(DTS_SANITIZE "" CACHE STRING "Sanitizers for every target, e.g. address,undefined (empty: none)")
option(DTS_FUZZ "Build the libFuzzer targets in fuzz/ (needs clang; implies DTS_SANITIZE=address,undefined)" OFF)

if(DTS_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "DTS_FUZZ=ON needs clang and its libFuzzer runtime (Debian 12: clang-16, libclang-rt-16-dev): "
                        "configure a separate build directory with -DCMAKE_CXX_COMPILER=clang++-16")
  endif()
  if(DTS_SANITIZE STREQUAL "")
    set(DTS_SANITIZE address,undefined)
  endif()
  # Coverage feedback from every library the fuzz targets link, not only from the targets;
  # the targets themselves add -fsanitize=fuzzer (libFuzzer's main) in fuzz/CMakeLists.txt.
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>)
  # Sources silence GCC-only warnings by name (#pragma GCC diagnostic ignored "-Wstringop-truncation").
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wno-unknown-warning-option>)
endif()

if(NOT DTS_SANITIZE STREQUAL "")
  # A UBSan finding aborts the test that found it (no recovery) instead of scrolling past.
  set(_dts_sanitize_flags -fsanitize=${DTS_SANITIZE} -fno-omit-frame-pointer)
  if(DTS_SANITIZE MATCHES "undefined")
    list(APPEND _dts_sanitize_flags -fno-sanitize-recover=undefined)
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${_dts_sanitize_flags}>")
  add_link_options(${_dts_sanitize_flags})
  # Libraries at -O1, as AddressSanitizer's documentation advises; executables (the tests, the
  # binary's main, the benches) at -O0, except those whose own code does the test's work (target
  # property DTS_SANITIZE_O1). The checks are the same at either level; the build is much shorter,
  # and the build is most of CI's sanitize stage. Measured with ASan + UBSan:
  # strategies/ps/ps_strategy.cpp 107 s at -O3, 45 s at -O1; results/compare_test.cpp 33 s at -O1,
  # 11 s at -O0. Most tests spend their time in the libraries, which keep -O1; the collective
  # algorithms' tests fill and check their buffers themselves, and took 5x as long at -O0.
  # Either comes after the build type's -O3, so it wins. Not for the fuzz build, whose targets run
  # for a fixed time: there the speed of each run is coverage.
  if(NOT DTS_FUZZ)
    set(_dts_o0 "$<AND:$<STREQUAL:$<TARGET_PROPERTY:TYPE>,EXECUTABLE>,$<NOT:$<BOOL:$<TARGET_PROPERTY:DTS_SANITIZE_O1>>>>")
    add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:$<IF:${_dts_o0},-O0,-O1>>")
  endif()

  # Every executable carries its sanitizer defaults (fuzz/sanitizer_defaults.cpp): a test run by
  # ctest, under mpirun, or by hand behaves alike, and the environment (ASAN_OPTIONS,
  # UBSAN_OPTIONS, LSAN_OPTIONS) still overrides them. The leak suppressions (Open MPI's
  # allocations it never frees) are read from the source tree at run time.
  add_library(dts_sanitizer_defaults OBJECT ${PROJECT_SOURCE_DIR}/fuzz/sanitizer_defaults.cpp)
  target_compile_definitions(dts_sanitizer_defaults PRIVATE
    DTS_LSAN_SUPPRESSIONS="${PROJECT_SOURCE_DIR}/fuzz/lsan_suppressions.txt")
  link_libraries("$<$<STREQUAL:$<TARGET_PROPERTY:TYPE>,EXECUTABLE>:dts_sanitizer_defaults>")
  add_link_options(LINKER:--export-dynamic-symbol=dlclose)
  message(STATUS "dtsuite sanitizers: ${DTS_SANITIZE} (fuzz targets: ${DTS_FUZZ})")
endif()

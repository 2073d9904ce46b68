# Test helpers: dts_add_test() for one-process GoogleTest binaries, dts_add_mpi_test() for
# GoogleTest binaries run under mpirun at each listed rank count. Exit code 77 means SKIP
# (a test that needs a GPU on a machine without one).
set(DTS_MPIEXEC_FLAGS "" CACHE STRING "Extra launcher flags for MPI tests")
if(MPIEXEC_EXECUTABLE MATCHES "mpiexec.mpich|mpirun.mpich|hydra")
  set(_dts_launcher_defaults "")
else()
  # Open MPI: ranks may outnumber cores on small CI machines; yield instead of spinning.
  set(_dts_launcher_defaults --oversubscribe --bind-to none --mca mpi_yield_when_idle 1)
endif()
set(DTS_MPIEXEC_PREFLAGS ${_dts_launcher_defaults} ${DTS_MPIEXEC_FLAGS})

# dts_add_test(NAME [NO_MAIN] SOURCES src... LIBS lib...); NO_MAIN: the test brings its own main()
# (for example to exit 77 when it needs a GPU and finds none).
function(dts_add_test name)
  cmake_parse_arguments(T "NO_MAIN" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest dts_warnings)
  if(NOT T_NO_MAIN)
    target_link_libraries(${name} PRIVATE GTest::gtest_main)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "unit;${T_LABELS}")
endfunction()

# dts_add_mpi_test(NAME SOURCES src... LIBS lib... NP 1 2 3 4): one ctest per rank count, NAME_npN.
# The binary gets the expected world size as DTS_EXPECT_WORLD_SIZE so a launcher mix-up
# (N singleton jobs instead of one job of N) fails loudly.
function(dts_add_mpi_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;NP;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} dts_mpi_gtest_main GTest::gtest dts_warnings)
  # Under AddressSanitizer, no leak check at the exit of an MPI test's ranks: LeakSanitizer's
  # tracer, stopping every thread of a rank while Open MPI's progress threads wind down, itself
  # crashed (SIGSEGV in the tracer, "LeakSanitizer has encountered a fatal error") after all of a
  # test's cases had passed. Memory errors are still caught there; leaks of dtsuite's own code are
  # looked for by the one-process tests, which run the same libraries.
  set(leak_check "")
  if(DTS_SANITIZE MATCHES "address")
    set(leak_check ";ASAN_OPTIONS=detect_leaks=0")
  endif()
  foreach(np IN LISTS T_NP)
    add_test(NAME ${name}_np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${DTS_MPIEXEC_PREFLAGS}
                     ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${name}> ${MPIEXEC_POSTFLAGS})
    set_tests_properties(${name}_np${np} PROPERTIES
      ENVIRONMENT "DTS_EXPECT_WORLD_SIZE=${np};OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1${leak_check}"
      PROCESSORS ${np} SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS "mpi;${T_LABELS}")
  endforeach()
endfunction()

# dts_add_e2e_test(NAME TIMEOUT [SANITIZE] SOURCES ... LIBS ...): an end-to-end test of the dtsuite
# binary (harness/testing/e2e.h), run under mpirun or alone; a suite's own live in its folder.
# SANITIZE: the sanitizer stage runs it too (label `sanitize`; scripts/bootstrap.sh), with the
# MPI tests' leak-check exception for the binary's ranks.
function(dts_add_e2e_test name timeout)
  cmake_parse_arguments(E "SANITIZE" "" "" ${ARGN})
  string(REPLACE ";" " " launcher_flags "${DTS_MPIEXEC_PREFLAGS};${MPIEXEC_PREFLAGS}")
  set(labels e2e)
  set(leak_check "")
  if(E_SANITIZE)
    list(APPEND labels sanitize)
    if(DTS_SANITIZE MATCHES "address")
      set(leak_check ";ASAN_OPTIONS=detect_leaks=0")
    endif()
  endif()
  dts_add_test(${name} ${E_UNPARSED_ARGUMENTS} LABELS ${labels})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_definitions(${name} PRIVATE
    DTS_BINARY="$<TARGET_FILE:dtsuite>" DTS_MPIEXEC="${MPIEXEC_EXECUTABLE}" DTS_MPIEXEC_FLAGS="${launcher_flags}")
  add_dependencies(${name} dtsuite)
  set_tests_properties(${name} PROPERTIES PROCESSORS 2 TIMEOUT ${timeout}
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1${leak_check}")
endfunction()

# dts_add_e2e_hang_test(BINARY NAME FILTER TIMEOUT): the tests of e2e test BINARY that the GoogleTest
# filter FILTER selects run as ctest NAME, with a TIMEOUT of their own, and no longer as part of
# BINARY's test. Each holds a hang that a regression would bring back: it should fail in that
# short time, not hold CI for the whole binary's timeout.
function(dts_add_e2e_hang_test binary name filter timeout)
  add_test(NAME ${name} COMMAND ${binary})
  get_test_property(${binary} ENVIRONMENT environment)
  list(FILTER environment EXCLUDE REGEX "^GTEST_FILTER=")  # an earlier hang test's exclusion
  get_test_property(${binary} LABELS labels)
  set_tests_properties(${name} PROPERTIES PROCESSORS 2 TIMEOUT ${timeout} SKIP_RETURN_CODE 77
                       LABELS "${labels};hang" ENVIRONMENT "${environment};GTEST_FILTER=${filter}")
  # BINARY's own test leaves out every hang test of it: one negative filter of them all.
  get_property(held GLOBAL PROPERTY DTS_HANG_FILTERS_${binary})
  list(APPEND held "${filter}")
  set_property(GLOBAL PROPERTY DTS_HANG_FILTERS_${binary} "${held}")
  list(JOIN held ":" excluded)
  set_tests_properties(${binary} PROPERTIES ENVIRONMENT "${environment};GTEST_FILTER=-${excluded}")
endfunction()

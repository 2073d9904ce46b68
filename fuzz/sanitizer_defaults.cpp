// Default options of the sanitizer runtimes, linked into every executable of a -DDTS_SANITIZE
// build (cmake/DtsSanitizers.cmake): the same behaviour under ctest, mpirun or by hand. The
// environment (ASAN_OPTIONS, UBSAN_OPTIONS, LSAN_OPTIONS) overrides any of them.

extern "C" {

// Any finding ends the process with a stack trace; leaks are looked for at exit.
const char* __asan_default_options() { return "detect_leaks=1:abort_on_error=1"; }

// UBSan aborts on its first finding (the build also passes -fno-sanitize-recover=undefined).
const char* __ubsan_default_options() { return "halt_on_error=1:abort_on_error=1:print_stacktrace=1"; }

// Open MPI, PMIx, hwloc and libevent keep allocations until exit (or lose them at finalize):
// suppressed by library, so a leak of dtsuite's own code is still reported. The file says which.
const char* __lsan_default_options() { return "suppressions=" DTS_LSAN_SUPPRESSIONS ":print_suppressions=0"; }

// Open MPI unloads its components (mca_*.so) in MPI_Finalize; a leak report of what they
// allocated would then name no module, and no suppression could tell it from a leak of ours.
// Sanitized executables keep every library loaded instead (exported: cmake/DtsSanitizers.cmake).
int dlclose(void*) { return 0; }

}  // extern "C"

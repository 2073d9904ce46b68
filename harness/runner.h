// The dtsuite program: parse the command line, start MPI, build the stack under test, plan and
// run every case, hand records to the sinks, and decide the exit code (DESIGN.md):
// 0 all pass or skip, 1 any case fails, 2 usage or set-up error, 3 a case timed out (hang),
// 128 + N the run was interrupted by signal N (130 SIGINT, 143 SIGTERM).
#pragma once
#include <string>

namespace dts {

inline constexpr int kExitPass = 0, kExitFail = 1, kExitUsage = 2, kExitTimeout = 3, kExitSignalBase = 128;

int harness_main(int argc, char** argv);

// "2026-11-27T01:02:03.456Z": now, UTC, to the millisecond (a record's timestamp).
std::string utc_timestamp();
// "20261127T010203Z-3fa9c1": now and 24 random bits (a run's id).
std::string new_run_id();

}  // namespace dts

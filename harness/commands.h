// The commands that work on results files rather than on a running job: `compare` (the baseline
// gate) and `report` (the HTML report). They run without MPI; each returns the exit code of
// DESIGN.md (0 pass, 1 regression, 2 bad input).
#pragma once
#include "harness/cli.h"

namespace dts {

int run_compare(const CompareOptions& options);  // harness/compare_command.cpp
int run_report(const ReportOptions& options);    // harness/report_command.cpp

}  // namespace dts

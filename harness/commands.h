// The commands that work on results files rather than on a running job: `compare` (the baseline
// gate) and `report` (the HTML report). They run without MPI; each returns the exit code of
// DESIGN.md (0 pass, 1 regression, 2 bad input, 3 an input that never came).
#pragma once
#include <exception>

#include "harness/cli.h"
#include "results/csv_reader.h"

namespace dts {

int run_compare(const CompareOptions& options);  // harness/compare_command.cpp
int run_report(const ReportOptions& options);    // harness/report_command.cpp
int run_ab(const AbOptions& options);            // harness/ab_command.cpp
int run_plan(const PlanOptions& options);        // harness/plan_command.cpp
int run_trace(const TraceOptions& options);      // harness/trace_command.cpp

// How compare and report read results files: FIFOs and pipes waited on at most `timeout_seconds`,
// a torn last row said on stderr as a warning (harness/report_command.cpp).
CsvReadOptions csv_read_options(double timeout_seconds);
// The exit code of an error that ended compare or report: 3 for a timeout (an input that never
// came), 2 for everything else (bad input).
int exit_code_of(const std::exception& error);

}  // namespace dts

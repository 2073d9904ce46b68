// `dtsuite report A.csv [B.csv ...] -o report.html`: reads each results CSV, and writes one
// self-contained HTML page with plots (results/report.h). No MPI. An unreadable or malformed CSV,
// a missing gnuplot or an unwritable output is one line on stderr and exit code 2; an input FIFO
// without bytes, or a gnuplot run, past -T is one line and exit code 3 (the gnuplot stopped with
// its process group, the output left as it was).
#include <cstdio>
#include <exception>
#include <vector>

#include "core/error.h"
#include "harness/commands.h"
#include "harness/runner.h"
#include "results/csv_reader.h"
#include "results/output_paths.h"
#include "results/report.h"

namespace dts {

int run_report(const ReportOptions& options) {
  try {
    std::vector<NamedPath> inputs;
    for (const std::string& path : options.inputs) inputs.push_back({"the results file", path});
    check_outputs(inputs, {{"-o", options.output_path}});
    std::vector<ResultsFile> files;
    size_t records = 0;
    for (const std::string& path : options.inputs) {
      files.push_back({path, read_results_csv(path, csv_read_options(options.timeout_seconds))});
      records += files.back().records.size();
    }
    write_report(files, options.output_path, nullptr, "", "", nullptr, options.timeout_seconds);
    std::printf("dtsuite: report of %zu records from %zu file(s) written to %s\n", records, files.size(),
                options.output_path.c_str());
    return kExitPass;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtsuite: error: %s\n", e.what());
    return exit_code_of(e);
  }
}

CsvReadOptions csv_read_options(double timeout_seconds) {
  CsvReadOptions options;
  options.timeout_seconds = timeout_seconds;
  options.warn = [](const std::string& warning) { std::fprintf(stderr, "dtsuite: warning: %s\n", warning.c_str()); };
  return options;
}

int exit_code_of(const std::exception& error) {
  const auto* e = dynamic_cast<const Error*>(&error);
  return e && e->kind() == Error::Kind::timeout ? kExitTimeout : kExitUsage;
}

}  // namespace dts

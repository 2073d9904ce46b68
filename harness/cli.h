// Command-line parsing for the dtsuite binary (CLI11). Flags of `run` mirror nccl-tests
// (-b -e -f -n -w -d -o -r -c -T) so its users feel at home. Parsing happens before MPI starts;
// a bad flag or value becomes UsageError, reported as one line and exit code 2.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "suites/profiles/profile.h"
#include "suites/suite.h"

namespace dts {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// `dtsuite compare BASELINE.csv CURRENT.csv`: the regression gate (harness/compare_command.cpp).
struct CompareOptions {
  // BASELINE... CURRENT: results CSVs or folders of them (every *.csv, by name); the last is the
  // current run, every other file's runs (run_id, repetition) are baseline runs.
  std::vector<std::string> inputs;
  double tolerance_percent = 5;  // a change smaller than this is never a regression
  double false_alarm_percent = 5;  // with 2+ baseline runs: chance that an unchanged run fails the gate
  bool samples = false;          // judge noise from per-iteration samples instead of p05/p95
  size_t min_runs = 0;           // baseline runs a timing verdict needs; 0: derived from the false-alarm rate
  std::vector<std::string> expect_paths;  // --expect: known deviations (results/expectations/*.toml)
  std::string csv_path;          // optional: the comparison table as CSV
  std::string junit_path;        // optional: one testcase per compared row
  std::string report_path;       // optional: the current run's HTML report with the gate's section
  double timeout_seconds = 300;  // -T: wait for a FIFO's or pipe's bytes at most this long; 0: no limit
};

// `dtsuite ab --a CMD --b CMD --rounds K --out DIR`: interleaved A/B (harness/ab_command.cpp).
struct AbOptions {
  std::string a_command, b_command;  // shell commands; `{csv}` stands for the round's results file
  size_t rounds = 0;                 // 0 (no commands): judge the rounds already in `out_dir`
  std::string out_dir;               // the rounds' files and logs
  double tolerance_percent = 5;      // a change within this either way is `same`
  double false_alarm_percent = 5;    // chance that identical stacks get a `different` row
  std::string csv_path, junit_path, report_path;
  // -T: seconds a side's run of a round may take (a whole run, so longer than compare's wait), and
  // a rounds file's wait for bytes; 0: no limit.
  double timeout_seconds = 3600;
};

// `dtsuite report A.csv [B.csv ...] -o report.html` (harness/report_command.cpp).
struct ReportOptions {
  std::vector<std::string> inputs;
  std::string output_path = "report.html";
  double timeout_seconds = 300;  // -T, as compare's; also each plot's gnuplot run
};

// `dtsuite plan --measurements A.csv ... --ranks N`: the layout planner (harness/plan_command.cpp,
// planner/). No MPI.
struct PlanOptions {
  std::vector<std::string> measurements;  // results CSVs of one stack
  int ranks = 0, ranks_per_node = 0;      // ranks_per_node 0: every rank on one node
  int64_t batch = 64;                     // global batch rows
  int layers = 3, width = 64, input = 32, classes = 10;  // the MLP (the training flags' defaults)
  int64_t parameters = 0;                 // > 0: the width that gives about this many parameters
  std::string memory_per_rank;            // "16G"; empty: no limit
  std::string strategies = "all";  // all: every strategy the planner prices (planner::planned_strategies)
  std::string csv_path;                   // optional: plan_* rows
  int top = 0;                            // rows of the table printed; 0: every layout
  std::string optimizer = "sgd";          // what the layouts train with: its state counts in memory
  bool extend = false;                    // --extend: group shapes not measured extended by the ring model
  int verify = 0;                         // never set here: `plan --verify` is parsed as `run plan` (cli.cpp)
  double timeout_seconds = 300;           // -T, as compare's
};

// `dtsuite trace check|stats DIR`, `dtsuite trace import FILE... --to DIR`, `dtsuite trace predict
// REPLAY.csv --measurements M.csv...` (harness/trace_command.cpp, trace/, planner/). No MPI.
struct TraceOptions {
  std::string action;               // check, stats, import, predict
  // check, stats: one trace folder; import: the source files, one per rank; predict: a replay's CSV
  std::vector<std::string> inputs;
  std::string to_dir;               // import: the trace folder to write (new, or without rank files)
  std::string format = "auto";      // import: auto, pytorch-et, kineto, chakra
  int world = -1;                   // import: the world size where the sources do not say it
  std::vector<std::string> measurements;  // predict: the stack's results CSVs the planner fits
  double timeout_seconds = 300;     // -T, as compare's
};

struct Command {
  enum class Kind { run, list, compare, ab, report, plan, trace, help, version } kind = Kind::help;
  std::string help_text;  // for Kind::help
  RunOptions run;
  std::string csv_path;      // empty: out/dtsuite-<run id>.csv
  std::string junit_path;    // --junit: JUnit XML, one testcase per case
  std::string prom_path;     // --prom: Prometheus textfile (node_exporter textfile collector)
  std::string push_url;      // --push: Pushgateway URL
  int metrics_port = 0;      // --metrics-port: serve /metrics during the run; 0: off
  std::string metrics_address = "127.0.0.1";  // --metrics-address: where /metrics listens
  std::string profile_path;  // --profile: acceptance thresholds (suites/profiles/*.toml)
  std::optional<Profile> profile;  // loaded from profile_path, its [run] defaults already applied
  std::vector<std::string> expect_paths;  // --expect: known deviations (results/expectations/*.toml)
  CompareOptions compare;
  AbOptions ab;
  ReportOptions report;
  PlanOptions plan;
  TraceOptions trace;
  std::string record_trace_dir;  // run --record-trace: every call of the stack, per rank (trace/recorder.h)
  size_t chunk_bytes = 0;  // --chunk-bytes; 0 (auto): the ring's own rule
  int fault_rank = -1;
  int64_t fault_after = 0;
  double fault_rate = 1;  // --fault-rate: the fraction of armed calls faulted
};

// Where the text of `run --profile FILE` comes from: read here (read_profile_file), or handed in
// (the harness reads it once, on rank 0, and gives every rank the same bytes). An empty function:
// the profile is not loaded at all (cmd.profile stays unset; the harness's first look at the
// command line, before MPI starts).
using ProfileText = std::function<std::string(const std::string& path)>;
std::string read_profile_file(const std::string& path);
// `run --profile auto`: the shipped profile for the part the ranks run on, chosen once MPI runs
// (harness/runner.cpp; a file named auto is ./auto).
inline constexpr std::string_view kAutoProfile = "auto";

// Throws UsageError with a one-line message on any bad flag or value (Error{timeout} when the
// profile's text never came).
Command parse_command_line(int argc, char** argv, const ProfileText& profile_text = read_profile_file);

}  // namespace dts

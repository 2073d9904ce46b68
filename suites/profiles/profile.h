// Acceptance profiles: thresholds per metric and selector, read from suites/profiles/*.toml
// (schema in suites/profiles/README.md). The harness loads one with `run --profile FILE` and
// passes every record through a ProfileJudge on rank 0 before the sinks see it. No MPI here.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/input_file.h"
#include "results/record.h"
#include "results/selector.h"

namespace dts {

// One [[threshold]] table: which records it judges (selectors; an empty list or an unset bound
// matches anything) and the bound their `value` must meet. Both bounds are inclusive: a value
// equal to `min` or `max` passes.
// The selectors are results/selector.h's, shared with expectation files.
struct Threshold : RecordSelector {
  int index = 0;  // 1-based position among the file's [[threshold]] tables, as cited in details
  int line = 0;   // line of its [[threshold]] header

  std::string metric;  // required; one of SCHEMA.md's metric names

  std::optional<double> min, max;
  // What is judged: the record's `value` (the median of a timing), or one of its distribution's
  // columns (min, p05, median, p95, max; for busbw `max` is the fastest iteration). A record
  // without a distribution (n = 0) is judged on its value.
  std::string statistic = "value";
  std::string source;     // required: where the number comes from, so a reviewer can check it
  bool optional = false;  // true: matching no record is a skip, not a failure
  // A bound stated as a fraction of a [[spec]] figure: min = fraction * that figure's value,
  // set when the profile is loaded (`source` then gives the fraction's reason, and the spec's
  // citation is added to it). Empty: min and max are the file's own numbers.
  std::string spec;
  std::optional<double> fraction;
};

// One [[spec]] table: a published figure of the part the profile is for (a datasheet's matrix
// throughput, HBM bandwidth, NVLink or PCIe rate), with the document it comes from.
struct SpecFigure {
  std::string name;    // "tf32_dense", "hbm_bandwidth": what thresholds name it by
  double value = 0;    // > 0, in `unit`
  std::string unit;    // one of results/SCHEMA.md's units: flop_per_second, bytes_per_second, ...
  std::string source;  // required: the datasheet, its revision or date, and where in it
  int line = 0;
};

// One [[measured]] table: the fraction of a spec figure dtsuite reached on one part, kept apart
// from the cited figures (a measurement of ours, not the vendor's).
struct MeasuredFraction {
  std::string spec;    // a [[spec]] name
  double fraction = 0;
  std::string on;      // "one H200 SXM (driver 570.124.06, CUDA 12.8)"
  std::string source;  // what ran, when
  int line = 0;
};

// A `run` flag the profile sets when the command line does not: `flag` is the flag's long name
// (`minbytes`, `datatype`, `suites` for the positional list), `value` its command-line text
// (lists joined with commas), `items` the list's elements.
struct RunDefault {
  std::string flag, value;
  std::vector<std::string> items;
  int line = 0;
};

struct Profile {
  std::string path;  // as given; cited in errors and details
  std::string name, description;
  // Part names this profile is for, whole, as the inventory reads them (a GPU's NVML/CUDA name,
  // "NVIDIA H100 80GB HBM3", else the CPU model): `--profile auto` picks the profile one of whose
  // parts is every rank's part name (case-insensitive; whole names, so "NVIDIA H200" is not
  // "NVIDIA H200 NVL", a card of other figures). Empty: never picked by auto.
  std::vector<std::string> parts;
  std::vector<RunDefault> run;
  std::vector<SpecFigure> specs;
  std::vector<MeasuredFraction> measured;
  std::vector<Threshold> thresholds;

  // "acceptance-cpu.toml": the file name used in citations.
  std::string file_name() const;
};

// Bounds of a profile file, far past any real one (the shipped ones are under 10 KB with lines
// under 200 bytes): a longer file or line is not a profile.
inline constexpr int64_t kProfileMaxBytes = 1 << 20;
inline constexpr int64_t kProfileMaxLine = 64 * 1024;
InputLimits profile_limits();

// Parse a profile. Any problem (TOML syntax, unknown key, wrong type, unknown metric, op, dtype,
// suite or strategy, min > max, no bound, no source) throws Error{invalid_argument} with one
// line "PATH:LINE: reason"; an unreadable file gives Error{io} naming it and the reason, a file
// past the bounds Error{invalid_argument} (core/input_file.h: a device is refused before it is read).
Profile load_profile(const std::string& path);
Profile parse_profile(std::string_view text, const std::string& path);

// Whether `record` is one that `threshold` is about (selectors only, not the bound).
bool matches(const Threshold& threshold, const Record& record);

// Judges records against a profile and remembers, per threshold, how many it matched and failed.
// Not thread-safe: the harness calls it under its sinks' lock.
class ProfileJudge {
 public:
  explicit ProfileJudge(Profile profile);

  // Applies every threshold that matches `record`. Records with verdict skip or timeout carry
  // no measurement and are left alone (they do not count as matched), as are the summary's own
  // records (suite "profile"). Otherwise the verdict becomes fail if any matching threshold
  // fails (an earlier fail stays fail), pass if all pass and the record was info or pass;
  // `threshold` is the bound of the first failing threshold (or of the first matching one,
  // unless the suite had already failed the record against its own); `detail` cites each
  // matching threshold, then the suite's own detail after " | ".
  void apply(Record& record);

  // One `check` record per threshold (suite "profile", case "<file stem>/<index>/<metric>"): pass if
  // it matched and every match passed; fail if a match failed; if it matched nothing, fail
  // (skip for `optional = true`), since an acceptance run that never measured a required
  // quantity has not shown it. Identity labels are for the harness to fill.
  std::vector<Record> summary() const;

  const Profile& profile() const { return profile_; }

 private:
  Profile profile_;
  std::vector<int64_t> matched_, failed_;
  std::vector<std::string> first_failure_;
};

// The `run` flags a profile's [run] table may set, by long name ("suites": the positional list):
// what is measured and how. An allow-list: any other key is refused at its line, so a flag added
// later is no profile key until it is listed. The outputs and listeners (csv, junit, prom, push,
// metrics-port, metrics-address), profile and node are the command line's alone
// (command_line_only_run_flags), refused with their reason.
std::vector<std::string_view> profile_run_keys();
std::vector<std::string_view> command_line_only_run_flags();

// The profiles shipped with dtsuite (suites/profiles/*.toml, built into the binary): file name
// and text, by file name.
struct BuiltinProfile {
  std::string_view file_name, text;
};
const std::vector<BuiltinProfile>& builtin_profiles();

// `--profile auto`: the shipped profile for `part` (every rank's part name: its GPU's, else its
// CPU model; the caller refuses a job whose ranks differ): the one whose [profile] parts names
// `part` whole, case-insensitive. Error{invalid_argument}, one line, when none is or more
// than one is.
BuiltinProfile choose_builtin_profile(const std::string& part);

// The metric names a threshold may name: those of this build's suites (results/catalog.h).
const std::vector<std::string_view>& known_metrics();

}  // namespace dts

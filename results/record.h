// Record: one measurement or one verdict, the unit every sink writes (CSV row, console line,
// later Prometheus sample and JUnit testcase). Fields mirror the CSV columns of SCHEMA.md.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dts {

// 2 added the `samples` column, 3 the `seed` column, 4 `repetition`, 5 `mpi_config`
// (results/SCHEMA.md); readers accept 1 to 5.
inline constexpr int kSchemaVersion = 5;

// xfail: a failure an expectation file names (a known deviation, cited; results/expectations.h);
// xpass: an expectation whose deviation no longer shows (a stale waiver), which fails the run.
enum class Verdict : uint8_t { pass, fail, skip, info, timeout, xfail, xpass };
std::string_view name(Verdict verdict);
// Whether a verdict fails its case and the run: fail, timeout, xpass.
inline bool is_failure(Verdict v) { return v == Verdict::fail || v == Verdict::timeout || v == Verdict::xpass; }

// Labels: what the number is about. Stack identity (backend .. ranks_per_node) is filled by the
// harness on every Record; the rest by the suite.
struct Labels {
  std::string backend, backend_version, mpi_version, device, host;
  int world_size = 0, nodes = 0, ranks_per_node = 0;
  std::string op, dtype;
  int64_t bytes = -1;  // -1: not applicable (empty in CSV)
  std::string placement, strategy, config;
  // The MPI library's settings that choose what runs (Open MPI's MCA component selections, MPICH's
  // control variables), `key=value;...` sorted; empty: the library's defaults. Part of the stack.
  std::string mpi_config;
};

// Distribution of a timed quantity. n == 0: no distribution (a single value).
struct Stats {
  int64_t n = 0;
  double min = 0, p05 = 0, median = 0, p95 = 0, max = 0;
};
// Order statistics of `samples` (p05/p95 by linear interpolation between closest ranks).
Stats compute_stats(std::vector<double> samples);
// The distribution of bytes / t for a distribution of times t (algbw from time): the slowest
// iteration gives the lowest bandwidth, so min and max, p05 and p95 trade places.
Stats invert_stats(const Stats& time, double bytes);
// Every figure times `factor` (busbw from algbw).
Stats scale_stats(Stats s, double factor);

struct Record {
  std::string run_id, timestamp;  // filled by the harness when the record is emitted
  std::string suite, case_id, metric, unit;
  Labels labels;
  double value = 0;
  Stats stats;
  Verdict verdict = Verdict::info;
  double threshold = std::numeric_limits<double>::quiet_NaN();  // NaN: none
  std::string detail;
  // Per-iteration values behind `stats` (timed metrics), for `dtsuite compare --samples`;
  // empty when not kept.
  std::vector<double> samples;
  std::string seed;  // the run's --seed (decimal), filled by the harness; empty: not recorded
  int repetition = 1;  // which pass over the run's plan (--repeat) measured it, from 1
  // A fail record that says the case could not run to its end, not that a check did not hold:
  // what stopped it ("rank_lost": a rank of the job is gone), for sinks that tell the two apart
  // (JUnit: an <error> of this type instead of a <failure>). Empty on every other record. Not a
  // CSV column: `detail` says it in words.
  std::string error_type;
};

// The value of `key` in a config ("key=value;key=value"), or nothing when the key is absent.
std::optional<std::string> config_value(std::string_view config, std::string_view key);

// `config` without `key`'s pair ("redop=sum;count=4" without count: "redop=sum").
std::string config_without(std::string_view config, std::string_view key);

// The MPI library in a few words, from its version line (`mpi_version`): "Open MPI v4.1.4,
// package: ..." -> "Open MPI v4.1.4", "MPICH Version:\t4.0.2" -> "MPICH 4.0.2".
std::string short_mpi(const std::string& version);

// `text` safe to show on a terminal or in a page: valid UTF-8 passes; control bytes (escape
// sequences could rewrite the terminal), DEL and bytes that are not UTF-8 become U+FFFD.
// Newline and tab pass only when `keep_line_breaks`.
std::string printable(std::string_view text, bool keep_line_breaks = false);

// A number for details and labels, printf-style: "%.4g" gives enough digits to see why a value
// missed a bound, no more ("1.5e+09"); "%g" for settings as a user wrote them ("0.02").
std::string format_number(double value, const char* format = "%.4g");

// A figure for people with an SI prefix and 3 significant digits: format_si(4.1e10, "FLOP/s") is
// "41 GFLOP/s", format_si(1.23e-5, "s") "12.3 us". Zero, and values not finite, have no prefix.
std::string format_si(double value, const char* unit);

// A relative change, given as a fraction, in percent with its sign: 3 significant digits below
// +-1000% ("+5.26%", "-0.1%"), whole percents above ("+2450%").
std::string signed_percent(double fraction);

// The size of the job a record comes from. A row's world_size, nodes and ranks_per_node are the
// ranks that took part in its case (results/SCHEMA.md); a case that ran on a sub-world carries the
// job's size in config as `job=N`. Without it (a whole-job row, or a file written before rows
// said who took part) the job's size is the row's world_size.
int job_size(const Record& record);

// A sink writes every record as it comes. Rows must be durable (flushed to the OS) when write()
// returns, so a run killed with SIGKILL keeps everything already measured.
class Sink {
 public:
  virtual ~Sink() = default;
  virtual void write(const Record& record) = 0;
  virtual void close() {}
};

}  // namespace dts

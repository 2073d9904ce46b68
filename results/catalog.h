// What each suite publishes about its results: its name, the metrics its records carry and the
// report sections drawn from them. Suites register their entry beside their code (suites/suite.h,
// DTS_REGISTER_SUITE); the report, the profile checks and `dtsuite list` read the catalog, so a
// new suite touches only its own folder. No MPI here: `dtsuite report` and profiles run without it.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "results/record.h"

namespace dts {

struct MetricInfo {
  std::string name;  // the CSV `metric` column and the Prometheus series dtsuite_<name>
  std::string unit;  // "seconds", "bytes/s", "ratio", ... (results/SCHEMA.md)
  std::string help;  // one line: what the number is
};

// One kind of plot the report draws from a suite's records: `metric` against x, one series per
// stack and per value of `series` (labels or config keys), one plot per value of `split`.
struct PlotSpec {
  std::string metric;
  // X::metric: x is the value of the record of `x_metric` with the same case, config and
  // repetition in the same file (a prediction set against what was measured).
  enum class X { bytes, ranks, config, metric } x = X::ranks;
  std::string x_key;  // X::config: the config key holding x (e.g. "epoch")
  std::string x_metric;
  double x_scale = 1;     // X::metric: x values are divided by this before drawing
  bool diagonal = false;  // points only, and the line y = x drawn (X::metric: where the two agree)
  // X::config with y_key: a heat map of the value at (x, y) (e.g. src and dst of a pair of ranks),
  // one per stack and split value; series are not drawn then.
  std::string y_key;
  // Record keys: a label ("op", "dtype", "strategy", "placement") or a config key ("optimizer").
  std::string split;                // one plot per value (first-seen order); "" for one plot
  std::vector<std::string> series;  // what tells a stack's series apart (joined with '/')
  std::vector<std::pair<std::string, std::string>> exclude;  // (key, value) of records left out
  // "{split}" in id and title is replaced by the split's value.
  std::string id, title, x_label, y_label;
  double y_scale = 1;        // y values are divided by this before drawing (1e9: bytes/s -> GB/s)
  bool log_y = false;        // X::bytes: chosen from the data's spread instead
  int64_t max_bytes = -1;    // X::bytes: larger sizes are left out
  bool draw_threshold = false;  // draw the cases' bound when all cases at an x share one
};

struct SectionSpec {
  int order = 0;  // position on the page (collectives' sections first)
  std::string id, title, intro, empty_note;
  std::vector<PlotSpec> plots;
};

// A deviation kind a suite's check names in a failed row's detail ("saturates at 127", "NaN
// dropped by max"), and the rows that can carry it: their dtype and their config's redop ("none"
// for data movement). An expectation file may waive only these (results/expectations.h), and an
// entry's kind is stale only where one of its selected rows could have shown it.
struct DeviationKind {
  std::string kind, dtype, redop;
};

struct SuiteInfo {
  std::string name, summary;
  std::vector<MetricInfo> metrics;
  std::vector<SectionSpec> sections;
  std::vector<DeviationKind> deviation_kinds;  // what its check classifies; empty: none
  // Its records are each one rank's figure (config rank and node), judged against the rank's
  // peers: the report's acceptance section draws them as a bar per rank.
  bool per_rank_figures = false;
  // Config keys that become Prometheus labels on its rows, beyond the ones every suite's rows
  // carry (prometheus_config_label_keys): what tells its rows of one case and metric apart (a
  // rank, a node, a pair), of a cardinality bounded by the job.
  std::vector<std::string> label_keys;
};

// Registers (or replaces) the entry of info.name; returns true so it can initialize a static.
bool register_suite_info(SuiteInfo info);
// Every registered suite, by name.
std::vector<SuiteInfo> suite_catalog();
// The metrics any record may carry: "check" (every suite's verdict rows) and each suite's.
std::vector<std::string> catalog_metrics();
// The label_keys of suite `name`'s entry; none for a suite not registered.
std::vector<std::string> suite_label_keys(const std::string& name);
// Every suite's deviation kinds (a kind once per dtype and redop that can carry it).
std::vector<DeviationKind> catalog_deviation_kinds();
// The value of `key` in `record`: a label (op, dtype, strategy, placement, backend, device) or,
// failing that, a config key; "" when absent.
std::string record_key(const Record& record, const std::string& key);

}  // namespace dts

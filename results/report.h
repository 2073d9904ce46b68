// `dtsuite report`: one self-contained HTML page from one or more results CSVs. Records are
// grouped into plots here (unit-testable, no I/O); gnuplot draws each plot as inline SVG; the
// page has inline CSS only, so it opens anywhere without fetching anything.
#pragma once
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "results/ab.h"
#include "results/record.h"

namespace dts {

struct Comparison;  // results/compare.h

// One results CSV, already read (results/csv_reader.h).
struct ResultsFile {
  std::string path;
  std::vector<Record> records;
};

// A stack as the report tells stacks apart: backend, device and the job's size (job_size,
// results/compare.h) of a file's records, so a run's sub-world cases are not stacks of their own.
// When two files hold the same stack, the label adds the MPI library (short_mpi, results/record.h)
// where theirs differ, else the file name (two runs of it).
struct ReportStack {
  std::string backend, device, backend_version, mpi_version, host, run_id;
  int world_size = 0;   // ranks in the job
  size_t file = 0;      // index into the inputs
  std::string label;    // legend text, e.g. "ring(mpi) | cpu | 4 ranks"
};

struct PlotPoint {
  double x = 0, y = 0;
};

struct PlotSeries {
  std::string label;
  int stack = -1;      // index into ReportData::stacks (colour); -1: not a stack (a bound)
  int variant = 0;     // dtype, strategy, ... within a stack (dash and point type)
  std::vector<PlotPoint> points;  // sorted by x
};

// One cell of a heat map: the value at (x, y), the median of the records there.
struct HeatCell {
  double x = 0, y = 0, z = 0;
};

struct Plot {
  std::string id;       // unique within the page, e.g. "busbw-all_reduce"
  std::string title, x_label, y_label;
  bool log_x = false, log_y = false;
  double y_scale = 1;   // y values are divided by this before drawing (1e9: bytes/s -> GB/s)
  double x_scale = 1;   // x values likewise (PlotSpec::X::metric)
  bool diagonal = false;  // points only, and y = x drawn
  std::vector<PlotSeries> series;
  std::vector<HeatCell> cells;  // a heat map instead of series (PlotSpec::y_key)
  std::string note;     // shown under the plot: what was left out and why
};

// A section of the page: its plots, or, when the results hold no rows for it, why not.
struct ReportSection {
  std::string id, title, intro;
  std::vector<Plot> plots;
  std::string empty_note;  // set when plots is empty
};

// Verdict counts of one stack and suite, for the pass/fail table.
struct VerdictCounts {
  int stack = 0;
  std::string suite;
  std::map<std::string, int64_t> by_verdict;  // "pass" -> 12, ...
};

// A case's outcome on one stack: the worst verdict of its judged records (timeout, fail, skip,
// pass; info records are not judged) and the detail of the first record with it, after its
// metric and placement ("wrong out_of_place: exact inputs: ...").
struct CaseOutcome {
  std::string verdict;  // empty where the stack did not run the case
  std::string detail;
};

// A case that more than one stack ran and whose outcome differs between them: by verdict, or by
// the detail of a fail, skip or timeout (a passing record's detail holds measured numbers, which
// differ between any two runs).
struct CrossStackRow {
  std::string suite, case_id;
  std::vector<CaseOutcome> outcomes;  // one per ReportData::cross_stacks entry, in its order
};

// One row of the conformance matrix (collectives suite, two stacks or more): a collective and
// dtype, and per stack (ReportData::conformance_stacks, in order) each reduction op's worst
// verdict over the sizes and placements that stack ran, in plan order; an empty cell where the
// stack ran none of it.
struct ConformanceRow {
  std::string collective, dtype;
  std::vector<std::vector<std::pair<std::string, std::string>>> cells;  // per stack: (op, verdict)
};

struct ReportData {
  std::vector<std::string> inputs;
  std::vector<ReportStack> stacks;
  std::vector<ReportSection> sections;
  std::vector<VerdictCounts> verdicts;
  std::vector<std::pair<int, Record>> failures;  // (stack, record) with verdict fail or timeout
  // The cross-stack table (empty with fewer than two stacks): its columns, the stacks (indices
  // into `stacks`) that appear in any row, and its rows in the order the cases first appear.
  std::vector<int> cross_stacks;
  std::vector<CrossStackRow> cross_stack;
  std::vector<int> conformance_stacks;  // the stacks that ran collectives cases, in stack order
  std::vector<ConformanceRow> conformance;
  // What every rank ran on (suite `inventory`): (stack, record) of its rank_info and nic_speed
  // rows, in file order, and the ranks its failed checks name, by stack.
  std::vector<std::pair<int, Record>> inventory;
  std::map<int, std::set<int>> inventory_flagged;
  // For the acceptance section: (stack, record) of every per-rank figure (a record of a suite
  // whose catalog entry says per_rank_figures, with its rank in config: the hardware suite's),
  // and of every profile threshold's check row.
  std::vector<std::pair<int, Record>> per_rank;
  std::vector<std::pair<int, Record>> profile_checks;
  // `dtsuite ab --report`: the paired judgement of the rounds, and what A and B were.
  const AbComparison* ab = nullptr;
  std::string ab_a, ab_b;
  // `dtsuite compare --report`: the gate's verdict of every row against the baseline runs.
  const Comparison* gate = nullptr;
};

// Groups records into plots: one section per section a registered suite declares
// (results/catalog.h), in their order, each drawing its suite's records as its PlotSpecs say; a
// section with no rows says why (empty_note). Where several records share an x (reduction ops,
// roots) their median is drawn; the y axis of a size plot turns logarithmic when the values span
// more than 100x. Sizes of 0 bytes and non-positive values on a log axis cannot be drawn and are
// counted in the plot's note, and so are values gnuplot cannot draw (not finite, or past about
// 9e306 after the plot's scaling). Records with verdict skip or timeout carry no measurement and
// are not drawn. With two stacks or more it also finds the cases whose outcome differs between
// them (ReportData::cross_stack).
ReportData group_results(const std::vector<ResultsFile>& files);

// "a<b" -> "a&lt;b": every piece of text from a CSV goes through this before it is in the page.
std::string escape_html(const std::string& text);

// The gnuplot script that draws `plot` as SVG (data inline, `$S0 << EOD` blocks).
std::string gnuplot_script(const Plot& plot);

// Seconds one gnuplot run may take when the caller gives none (each command passes its -T).
inline constexpr double kGnuplotTimeoutSeconds = 300;

// Runs gnuplot on `script` and returns its SVG, ready to inline (XML prolog removed, element
// ids prefixed with `id_prefix` so that several plots can share one page). Error{io} when
// gnuplot cannot be started or fails, with its first error line; Error{timeout} when it runs
// past `timeout_seconds` (0: no limit): it is stopped with its process group (core/child_process.h).
std::string run_gnuplot(const std::string& script, const std::string& id_prefix,
                        double timeout_seconds = kGnuplotTimeoutSeconds);

// The bars of one per-rank figure, as inline SVG (no gnuplot): a bar per rank in `rows`' order,
// red where the record failed (an outlier named, or a threshold missed), and a dashed line at
// the records' threshold where they have one. Values in `unit` (flop_per_second drawn in
// GFLOP/s, bytes_per_second in GB/s).
std::string per_rank_bars_svg(const std::vector<const Record*>& rows, const std::string& unit);

// The page. `render` turns a plot into inline SVG (run_gnuplot in the command; a stub in tests).
// With an inventory, per-rank figures or profile checks in the results it opens with the
// acceptance section: the verdict, one line per failed item, the per-rank bars, the thresholds
// with their citations and the pair matrix heat map (a copy of the topology section's).
std::string render_html(const ReportData& data, const std::function<std::string(const Plot&)>& render);

// Reads nothing and writes `output_path`: group, draw every plot with gnuplot, render. With
// `ab` (and what A and B were), the page also has the A/B section: every judged row, `different`
// first, with B's change against A and its interval. With `gate`, the gate section: its counts,
// its power, and every row judged by numbers (regressed and missing first, then blind, improved,
// unchanged) with its change and the change it could have detected. Each gnuplot run may take
// `gnuplot_timeout_seconds` (run_gnuplot); the page is written only once every plot is drawn, so
// a failure leaves `output_path` as it was.
void write_report(const std::vector<ResultsFile>& files, const std::string& output_path,
                  const AbComparison* ab = nullptr, const std::string& a = "", const std::string& b = "",
                  const Comparison* gate = nullptr, double gnuplot_timeout_seconds = kGnuplotTimeoutSeconds);

}  // namespace dts

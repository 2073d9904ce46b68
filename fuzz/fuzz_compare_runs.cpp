// Fuzz target: compare's run identity and gate (results/compare.h) on results read from text. The
// input is a baseline CSV and a current CSV separated by the first NUL byte (none: the text is
// both sides). Every pair is judged or refused with Error{invalid_argument} on one line; a run
// (run_id, repetition) given twice among the baselines, or on both sides, is always refused
// (it was counted twice, or passed as its own baseline, before); anything else is a bug.
#include <cstddef>
#include <cstdint>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "fuzz/fuzz_check.h"
#include "results/compare.h"
#include "results/csv_reader.h"

namespace {

std::vector<dts::RecordedRun> runs_of(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  return dts::split_runs(dts::read_results_csv(in, name), name);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const size_t nul = bytes.find('\0');
  const std::string baseline_text = nul == std::string::npos ? bytes : bytes.substr(0, nul);
  const std::string current_text = nul == std::string::npos ? bytes : bytes.substr(nul + 1);
  std::vector<dts::RecordedRun> baselines, currents;
  try {
    // Two "files" of baselines (the same text twice when there is no third part): a run in both
    // is a run given twice.
    baselines = runs_of(baseline_text, "a.csv");
    currents = runs_of(current_text, "current.csv");
  } catch (const dts::Error&) {
    return 0;  // the reader's own refusals: fuzz_csv_reader's to check
  }
  if (baselines.empty() || currents.empty()) return 0;
  std::set<std::pair<std::string, int>> baseline_ids;
  bool repeated = false;
  for (const dts::RecordedRun& run : baselines) {
    repeated = !baseline_ids.insert({run.rows.front().run_id, run.rows.front().repetition}).second || repeated;
  }
  for (const dts::RecordedRun& run : currents) {
    repeated = baseline_ids.count({run.rows.front().run_id, run.rows.front().repetition}) > 0 || repeated;
  }
  try {
    const dts::Comparison c = dts::compare_runs(baselines, currents, dts::CompareSettings{});
    DTS_FUZZ_CHECK(!repeated, "a run given twice, or as its own baseline, was compared");
    DTS_FUZZ_CHECK(c.regressions + c.improvements + c.unchanged + c.not_judged <= c.rows.size(),
                   "more outcomes than compared rows");
  } catch (const dts::Error& e) {
    DTS_FUZZ_CHECK(e.kind() == dts::Error::Kind::invalid_argument, "a refusal is not invalid_argument");
    dts::fuzz::check_one_line(e.what());
  }
  return 0;
}

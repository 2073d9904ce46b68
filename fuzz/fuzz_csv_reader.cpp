// Fuzz target: read_results_csv (results/csv_reader.h), the input side of `dtsuite compare` and
// `dtsuite report`. Every input is read into records or refused with Error{invalid_argument}
// "NAME:LINE: reason" on one line; anything else (another exception, a crash, a hang, a row with
// statistics out of order) is a bug.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/error.h"
#include "fuzz/fuzz_check.h"
#include "results/csv_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string name = "fuzz.csv";
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    for (const dts::Record& record : dts::read_results_csv(in, name)) {
      DTS_FUZZ_CHECK(!record.suite.empty() && !record.case_id.empty() && !record.metric.empty(),
                     "a record without suite, case or metric was read");
      DTS_FUZZ_CHECK(record.stats.n >= 0 && record.labels.bytes >= -1, "a negative count was read");
      // The statistics of a measurement (n > 0, a unit) are finite and in order: compare judged
      // p05 > p95 `ok` and a NaN p05 `ok` before the reader refused them.
      const dts::Stats& s = record.stats;
      const bool ordered = std::isfinite(s.min) && std::isfinite(s.max) && s.min <= s.p05 && s.p05 <= s.median &&
                           s.median <= s.p95 && s.p95 <= s.max;
      DTS_FUZZ_CHECK(record.stats.n == 0 || record.unit.empty() || ordered, "statistics no sample has were read");
    }
  } catch (const dts::Error& e) {
    DTS_FUZZ_CHECK(e.kind() == dts::Error::Kind::invalid_argument, "malformed text is not invalid_argument");
    DTS_FUZZ_CHECK(std::string(e.what()).rfind(name + ":", 0) == 0, "the message does not start with NAME:");
    dts::fuzz::check_one_line(e.what());
  }
  return 0;
}

// Fuzz target: the planner's measurements (planner/measurements.h), what `dtsuite plan
// --measurements` makes of a results CSV: read, indexed and fitted. Every input is indexed or
// refused with Error{invalid_argument} on one line; a collective fit that is indexed prices every
// size it covers at a finite, positive time (a time of 1e200 s once priced calls at 0 ms, and a
// rate past 1e140 bytes a second fitted as a constant).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/error.h"
#include "fuzz/fuzz_check.h"
#include "planner/measurements.h"
#include "results/csv_reader.h"

namespace {

void check_refusal(const dts::Error& e) {
  DTS_FUZZ_CHECK(e.kind() == dts::Error::Kind::invalid_argument, "a bad measurement is not invalid_argument");
  dts::fuzz::check_one_line(e.what());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string name = "fuzz.csv";
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  dts::planner::Measurements m;
  try {
    m.add(dts::read_results_csv(in, name), name);
  } catch (const dts::Error& e) {
    check_refusal(e);
    return 0;
  }
  try {
    for (const dts::planner::CollectiveFit& c : m.collectives()) {
      for (const dts::planner::AlphaBetaPiece& p : c.fit.pieces) {
        for (const double bytes : {p.first_bytes, p.last_bytes}) {
          const double seconds = c.fit.seconds(bytes);
          DTS_FUZZ_CHECK(std::isfinite(seconds) && seconds > 0, "a fit prices a measured size at no time");
        }
      }
    }
  } catch (const dts::Error& e) {
    check_refusal(e);  // a fit that cannot be made (one size) says so
  }
  return 0;
}

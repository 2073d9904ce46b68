// Fuzz target: parse_digits (suites/convergence/digits.h), the bytes of `run convergence --data`,
// gzip or plain. Every input is a data set within its bounds or refused with Error{io} (a
// damaged gzip stream) or Error{invalid_argument} "NAME...": one line; anything else (another
// exception, a crash, a hang, memory past the bounds: -rss_limit_mb) is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"
#include "fuzz/fuzz_check.h"
#include "suites/convergence/digits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string name = "fuzz.csv.gz";
  try {
    const dts::LabeledData set = dts::parse_digits(std::string_view(reinterpret_cast<const char*>(data), size), name);
    DTS_FUZZ_CHECK(set.samples > 0 && set.samples <= dts::kDigitsMaxSamples, "a sample count past its bounds");
    DTS_FUZZ_CHECK(set.x.size() == static_cast<size_t>(set.samples * dts::kDigitsFeatures), "pixels and samples disagree");
    DTS_FUZZ_CHECK(set.labels.size() == static_cast<size_t>(set.samples), "labels and samples disagree");
    for (const double pixel : set.x) DTS_FUZZ_CHECK(pixel >= 0 && pixel <= dts::kDigitsMaxPixel, "a pixel out of range");
    for (const int32_t label : set.labels) DTS_FUZZ_CHECK(label >= 0 && label < dts::kDigitsClasses, "a label out of range");
  } catch (const dts::Error& e) {
    DTS_FUZZ_CHECK(e.kind() == dts::Error::Kind::invalid_argument || e.kind() == dts::Error::Kind::io,
                   "bad data is neither invalid_argument nor io");
    DTS_FUZZ_CHECK(std::string(e.what()).rfind(name, 0) == 0, "the message does not start with the file's name");
    dts::fuzz::check_one_line(e.what());
  }
  return 0;
}

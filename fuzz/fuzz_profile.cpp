// Fuzz target: parse_profile (suites/profiles/profile.h), the TOML acceptance profiles of
// `run --profile`. Every input is a profile or Error{invalid_argument} "PATH:LINE: reason" on
// one line; a profile that parses then judges a record that each of its thresholds matches.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "fuzz/fuzz_check.h"
#include "suites/profiles/profile.h"

namespace {

// A record that `threshold`'s selectors match, so apply() compares its value with the bound.
dts::Record record_for(const dts::Threshold& threshold, double value) {
  dts::Record r;
  r.suite = threshold.suites.empty() ? "collectives" : threshold.suites.front();
  r.case_id = "fuzz";
  r.metric = threshold.metric;
  r.value = value;
  dts::Labels& l = r.labels;
  l.op = threshold.ops.empty() ? "" : threshold.ops.front();
  l.dtype = threshold.dtypes.empty() ? "" : threshold.dtypes.front();
  l.strategy = threshold.strategies.empty() ? "" : threshold.strategies.front();
  l.placement = threshold.placements.empty() ? "" : threshold.placements.front();
  l.backend = threshold.backends.empty() ? "" : threshold.backends.front();
  l.device = threshold.devices.empty() ? "" : threshold.devices.front();
  for (const auto& [key, item] : threshold.config) l.config += (l.config.empty() ? "" : ";") + key + "=" + item;
  l.bytes = threshold.min_bytes >= 0 ? threshold.min_bytes : threshold.max_bytes;
  l.world_size = threshold.min_world_size > 0 ? threshold.min_world_size : threshold.max_world_size;
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = "fuzz.toml";
  try {
    const dts::Profile profile = dts::parse_profile(std::string_view(reinterpret_cast<const char*>(data), size), path);
    // [run] takes only the documented keys: never an output or a listener (csv, junit, prom,
    // push, metrics-port, metrics-address), which were taken before.
    const std::vector<std::string_view> keys = dts::profile_run_keys();
    for (const dts::RunDefault& d : profile.run) {
      DTS_FUZZ_CHECK(std::find(keys.begin(), keys.end(), d.flag) != keys.end(), "a [run] key off the list was taken");
      for (const char* decision : {"csv", "junit", "prom", "push", "metrics-port", "metrics-address"}) {
        DTS_FUZZ_CHECK(d.flag != decision, "a profile chose an output or a listener");
      }
    }
    dts::ProfileJudge judge(profile);
    for (const dts::Threshold& threshold : profile.thresholds) {
      DTS_FUZZ_CHECK(threshold.min || threshold.max, "a threshold without a bound was accepted");
      DTS_FUZZ_CHECK(!threshold.source.empty(), "a threshold without a source was accepted");
      for (const double value : {threshold.min.value_or(0.0), threshold.max.value_or(0.0)}) {
        dts::Record record = record_for(threshold, value);
        judge.apply(record);
      }
    }
    DTS_FUZZ_CHECK(judge.summary().size() == profile.thresholds.size(), "not one summary record per threshold");
  } catch (const dts::Error& e) {
    DTS_FUZZ_CHECK(e.kind() == dts::Error::Kind::invalid_argument, "a bad profile is not invalid_argument");
    DTS_FUZZ_CHECK(std::string(e.what()).rfind(path + ":", 0) == 0, "the message does not start with PATH:");
    dts::fuzz::check_one_line(e.what());
  }
  return 0;
}

// Record helpers: verdict names and order statistics.
#include "results/record.h"

#include <algorithm>
#include <charconv>
#include <string_view>

namespace dts {

std::string_view name(Verdict verdict) {
  switch (verdict) {
    case Verdict::pass: return "pass";
    case Verdict::fail: return "fail";
    case Verdict::skip: return "skip";
    case Verdict::info: return "info";
    case Verdict::timeout: return "timeout";
  }
  return "?";
}

Stats compute_stats(std::vector<double> samples) {
  Stats s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  const auto quantile = [&](double q) {
    const double pos = q * static_cast<double>(samples.size() - 1);
    const auto lo = static_cast<size_t>(pos);
    const size_t hi = std::min(lo + 1, samples.size() - 1);
    return samples[lo] + (samples[hi] - samples[lo]) * (pos - static_cast<double>(lo));
  };
  s.n = static_cast<int64_t>(samples.size());
  s.min = samples.front();
  s.max = samples.back();
  s.p05 = quantile(0.05);
  s.median = quantile(0.5);
  s.p95 = quantile(0.95);
  return s;
}

int job_size(const Record& r) {
  const std::string& config = r.labels.config;
  constexpr std::string_view kKey = "job=";
  for (size_t at = 0; at < config.size();) {
    const size_t end = std::min(config.find(';', at), config.size());
    if (end - at > kKey.size() && config.compare(at, kKey.size(), kKey) == 0) {
      int size = 0;
      const char* first = config.data() + at + kKey.size();
      const auto [last, error] = std::from_chars(first, config.data() + end, size);
      if (error == std::errc() && last == config.data() + end && size > 0) return size;
    }
    at = end + 1;
  }
  return r.labels.world_size;
}

}  // namespace dts

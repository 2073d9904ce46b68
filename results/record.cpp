// Record helpers: verdict names and order statistics.
#include "results/record.h"

#include <algorithm>

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

}  // namespace dts

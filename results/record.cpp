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

std::optional<std::string> config_value(std::string_view config, std::string_view key) {
  while (!config.empty()) {
    const size_t end = config.find(';');
    const std::string_view pair = config.substr(0, end);
    const size_t eq = pair.find('=');
    if (eq != std::string_view::npos && pair.substr(0, eq) == key) return std::string(pair.substr(eq + 1));
    if (end == std::string_view::npos) break;
    config.remove_prefix(end + 1);
  }
  return std::nullopt;
}

int job_size(const Record& r) {
  if (const auto job = config_value(r.labels.config, "job")) {
    int size = 0;
    const auto [last, error] = std::from_chars(job->data(), job->data() + job->size(), size);
    if (error == std::errc() && last == job->data() + job->size() && size > 0) return size;
  }
  return r.labels.world_size;
}

}  // namespace dts

// Ranges of integers (core/ranges.h).
#include "core/ranges.h"

#include <cerrno>
#include <cstdlib>

namespace dts {

std::string format_ranges(const std::vector<int>& values) {
  std::string text;
  for (size_t i = 0; i < values.size();) {
    size_t j = i;
    while (j + 1 < values.size() && values[j + 1] == values[j] + 1) ++j;
    if (!text.empty()) text += ",";
    text += std::to_string(values[i]);
    if (j > i) text += "-" + std::to_string(values[j]);
    i = j + 1;
  }
  return text;
}

namespace {

// A whole decimal number in [0, limit) from `text`; -1 otherwise.
long number(const std::string& text, int limit) {
  if (text.empty() || text.size() > 10) return -1;
  for (char c : text) {
    if (c < '0' || c > '9') return -1;
  }
  const long v = std::strtol(text.c_str(), nullptr, 10);
  return v < limit ? v : -1;
}

}  // namespace

std::vector<int> parse_ranges(const std::string& text, int limit) {
  std::vector<int> values;
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    const std::string part = text.substr(at, end - at);
    const size_t dash = part.find('-');
    const long lo = number(part.substr(0, dash), limit);
    const long hi = dash == std::string::npos ? lo : number(part.substr(dash + 1), limit);
    if (lo >= 0 && hi >= lo) {
      for (long v = lo; v <= hi; ++v) values.push_back(static_cast<int>(v));
    }
    at = end + 1;
  }
  return values;
}

}  // namespace dts

// Record helpers: verdict names and order statistics.
#include "results/record.h"

#include <cmath>
#include <cstdio>

#include <algorithm>
#include <cctype>
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
    case Verdict::xfail: return "xfail";
    case Verdict::xpass: return "xpass";
  }
  return "?";
}

Stats invert_stats(const Stats& time, double bytes) {
  // bytes / t is decreasing in t: the slowest iteration gives the lowest bandwidth.
  const auto inv = [&](double t) { return t > 0 ? bytes / t : 0.0; };
  Stats s;
  s.n = time.n;
  s.min = inv(time.max);
  s.p05 = inv(time.p95);
  s.median = inv(time.median);
  s.p95 = inv(time.p05);
  s.max = inv(time.min);
  return s;
}

Stats scale_stats(Stats s, double factor) {
  s.min *= factor;
  s.p05 *= factor;
  s.median *= factor;
  s.p95 *= factor;
  s.max *= factor;
  return s;
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

std::string config_without(std::string_view config, std::string_view key) {
  std::string kept;
  while (!config.empty()) {
    const size_t end = config.find(';');
    const std::string_view pair = config.substr(0, end);
    const size_t eq = pair.find('=');
    if (!(eq != std::string_view::npos && pair.substr(0, eq) == key)) kept += (kept.empty() ? "" : ";") + std::string(pair);
    if (end == std::string_view::npos) break;
    config.remove_prefix(end + 1);
  }
  return kept;
}

std::string short_mpi(const std::string& version) {
  std::string words;
  bool gap = false;
  for (const char c : version.substr(0, version.find_first_of(",\n"))) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      gap = !words.empty();
      continue;
    }
    if (gap) words += ' ';
    gap = false;
    words += c;
  }
  const size_t tag = words.find(" Version:");
  if (tag != std::string::npos) words.erase(tag, 9);
  return words;
}

int job_size(const Record& r) {
  if (const auto job = config_value(r.labels.config, "job")) {
    int size = 0;
    const auto [last, error] = std::from_chars(job->data(), job->data() + job->size(), size);
    if (error == std::errc() && last == job->data() + job->size() && size > 0) return size;
  }
  return r.labels.world_size;
}

std::string printable(std::string_view text, bool keep_line_breaks) {
  static const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      const bool control = c < 0x20 || c == 0x7f;
      const bool line_break = c == '\n' || c == '\t';
      out += control && !(keep_line_breaks && line_break) ? kReplacement : std::string(1, static_cast<char>(c));
      ++i;
      continue;
    }
    // The length a lead byte announces, and the smallest code point of that length (an overlong
    // encoding is not valid UTF-8).
    size_t length = 0;
    uint32_t code = 0, smallest = 0;
    if ((c & 0xe0) == 0xc0) length = 2, code = c & 0x1f, smallest = 0x80;
    else if ((c & 0xf0) == 0xe0) length = 3, code = c & 0x0f, smallest = 0x800;
    else if ((c & 0xf8) == 0xf0) length = 4, code = c & 0x07, smallest = 0x10000;
    bool valid = length > 0 && i + length <= text.size();
    for (size_t k = 1; valid && k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      valid = (next & 0xc0) == 0x80;
      code = (code << 6) | (next & 0x3f);
    }
    valid = valid && code >= smallest && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff);
    // C1 controls (U+0080..U+009F) act like control bytes on some terminals.
    valid = valid && !(code >= 0x80 && code <= 0x9f);
    if (valid) {
      out.append(text.substr(i, length));
      i += length;
    } else {
      out += kReplacement;
      ++i;
    }
  }
  return out;
}

std::string format_number(double value, const char* format) {
  char text[64];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

std::string format_si(double value, const char* unit) {
  static const char* const kLarge[] = {"", "K", "M", "G", "T", "P", "E"};
  static const char* const kSmall[] = {"", "m", "u", "n", "p"};
  const char* prefix = "";
  if (std::isfinite(value) && value != 0) {
    int i = 0;
    while (std::fabs(value) >= 1000 && i < 6) value /= 1000, ++i;
    prefix = kLarge[i];
    int j = 0;
    while (i == 0 && std::fabs(value) < 1 && j < 4) value *= 1000, ++j;
    if (j > 0) prefix = kSmall[j];
  }
  return format_number(value, "%.3g") + " " + prefix + unit;
}

std::string signed_percent(double fraction) {
  return format_number(fraction * 100, std::fabs(fraction) < 10 ? "%+.3g%%" : "%+.0f%%");
}

}  // namespace dts

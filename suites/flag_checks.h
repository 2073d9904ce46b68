// Checks of flag values shared by the harness and the suites' flag groups (CLI11 validators).
#pragma once
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <string>

namespace dts {

// A finite number in [lo, hi]. CLI11's Range lets NaN through (every comparison with NaN is
// false), and NaN then plans one case per byte (-f) or judges every case hung (-T).
inline CLI::Validator FiniteRange(double lo, double hi) {
  char range[96];
  std::snprintf(range, sizeof(range), "[%g - %g]", lo, hi);
  const std::string text = range;
  return CLI::Validator(
      [lo, hi, text](std::string& value) -> std::string {
        double v = 0;
        try {
          size_t used = 0;
          v = std::stod(value, &used);
          if (used != value.size()) return "'" + value + "' is not a number";
        } catch (const std::exception&) {
          return "'" + value + "' is not a number";
        }
        if (!std::isfinite(v) || v < lo || v > hi) return "'" + value + "' is not a finite number in " + text;
        return {};
      },
      "FLOAT in " + text);
}

}  // namespace dts

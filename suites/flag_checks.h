// Checks of flag values shared by the harness and the suites' flag groups (CLI11 validators).
#pragma once
#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace dts {

// `text` as a decimal number of type T (std::from_chars): the whole text, no space, no '+', no
// hex, and within T's range; std::nullopt otherwise. The rule every number inside a flag's text
// follows (CLI11 and std::sto* read "0x10" as 16, "-1" as 2^64 - 1 for an unsigned, " 16" as 16).
template <class T>
std::optional<T> decimal_of(std::string_view text) {
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// A finite number in [lo, hi]. CLI11's Range lets NaN through (every comparison with NaN is
// false), and NaN then plans one case per byte (-f) or judges every case hung (-T).
inline CLI::Validator FiniteRange(double lo, double hi) {
  char range[96];
  std::snprintf(range, sizeof(range), "[%g - %g]", lo, hi);
  const std::string text = range;
  return CLI::Validator(
      [lo, hi, text](std::string& value) -> std::string {
        // Decimal (decimal_of): std::stod read "0x10" as 16 and " 2" as 2.
        const std::optional<double> v = decimal_of<double>(value);
        if (!v) return "'" + value + "' is not a decimal number";
        if (!std::isfinite(*v) || *v < lo || *v > hi) return "'" + value + "' is not a finite number in " + text;
        return {};
      },
      "FLOAT in " + text);
}

// A flag given an empty value (a script's unset variable) is refused, saying what was expected
// (`hint`), where leaving the flag out has a meaning of its own. `description`: the help's.
inline CLI::Validator NotEmpty(const std::string& hint, const std::string& description = "") {
  return CLI::Validator([hint](std::string& v) { return v.empty() ? "an empty value (" + hint + ")" : std::string(); },
                        description);
}

// A comma-separated list of `names`, each at most once (core's parse_list: no empty item, no
// repeat, which would run and write the same cases twice). A validator, not an IsMember over the
// combinations: the help shows each name once, and a profile's [run] value is checked at its line.
inline CLI::Validator NameList(std::vector<std::string> names) {
  std::string known, listed;
  for (const std::string& n : names) {
    known += (known.empty() ? "" : ",") + n;
    listed += (listed.empty() ? "" : ", ") + n;
  }
  return CLI::Validator(
      [names, listed](std::string& value) -> std::string {
        try {
          for (const std::string& item : parse_list(value)) {
            if (std::find(names.begin(), names.end(), item) == names.end()) {
              return quoted_input(item) + " is not one of " + listed;
            }
          }
        } catch (const Error& e) {
          return e.what();
        }
        return {};
      },
      "{" + known + "},...");
}

}  // namespace dts

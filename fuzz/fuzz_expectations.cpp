// Fuzz target: parse_expectations (results/expectations.h), the TOML files of `run --expect` and
// `compare --expect`, and deviation_kinds, the reader of a wrong row's detail. Every input is a
// file or Error{invalid_argument} "PATH:LINE: reason" on one line; a file that parses has a
// library that starts with a name, only kinds the checks classify and a citation that is not
// blank in every entry, and judges a failed row built for each
// entry: xfail exactly when the row's kinds are all the entry's, one summary row per entry of
// the stack. The input read as a detail gives kinds that each appear in it.
#include <algorithm>
#include <set>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "fuzz/fuzz_check.h"
#include "results/catalog.h"
#include "results/expectations.h"

namespace {

// A failed `wrong` row that `e` selects (as far as its first choices say), on the stack named
// by `library`, with `kinds` in its detail.
dts::Record row_for(const dts::Expectation& e, const std::string& library, const std::vector<std::string>& kinds) {
  dts::Record r;
  r.suite = e.suites.empty() ? "collectives" : e.suites.front();
  r.case_id = "fuzz";
  r.metric = e.metric;
  r.verdict = dts::Verdict::fail;
  dts::Labels& l = r.labels;
  l.backend_version = library;
  l.backend = e.backend_patterns.empty() ? "mpi" : e.backend_patterns.front();
  l.op = e.ops.empty() ? "" : e.ops.front();
  l.dtype = e.dtypes.empty() ? "" : e.dtypes.front();
  l.placement = e.placements.empty() ? "" : e.placements.front();
  for (const auto& [key, item] : e.config) l.config += (l.config.empty() ? "" : ";") + key + "=" + item;
  if (!e.redops.empty()) l.config += (l.config.empty() ? "" : ";") + std::string("redop=") + e.redops.front();
  if (!e.mpi_datatypes.empty()) l.config += (l.config.empty() ? "" : ";") + std::string("mpi_datatype=") + e.mpi_datatypes.front();
  l.bytes = e.min_bytes >= 0 ? e.min_bytes : e.max_bytes;
  l.world_size = e.min_world_size > 0 ? e.min_world_size : e.max_world_size;
  r.detail = "overflow inputs: 1 wrong (x): ";
  for (size_t i = 0; i < kinds.size(); ++i) r.detail += (i ? ", " : "") + kinds[i] + ": 1";
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const std::string& kind : dts::deviation_kinds(text)) {
    DTS_FUZZ_CHECK(text.find(kind) != std::string_view::npos, "a deviation kind the detail does not hold");
  }
  const std::string path = "fuzz.toml";
  try {
    const dts::ExpectationFile file = dts::parse_expectations(text, path);
    DTS_FUZZ_CHECK(!file.entries.empty(), "a file without entries was accepted");
    std::set<std::string> waivable;
    for (const dts::DeviationKind& k : dts::catalog_deviation_kinds()) waivable.insert(k.kind);
    for (const dts::Expectation& e : file.entries) {
      DTS_FUZZ_CHECK(!e.libraries.empty() && !e.deviations.empty() && !e.citation.empty(),
                     "an entry without a library, deviation or citation was accepted");
      for (const std::string& kind : e.deviations) {
        DTS_FUZZ_CHECK(waivable.count(kind) == 1, "a kind no check names was accepted");
      }
      for (const std::string& pattern : e.libraries) {
        DTS_FUZZ_CHECK(pattern.front() != '*' && pattern.front() != '?', "a library pattern that names no library was accepted");
      }
      DTS_FUZZ_CHECK(e.citation.find_first_not_of(" \t\n\r\f\v") != std::string::npos, "a blank citation was accepted");
      // A library name its own first pattern matches once its wildcards are dropped.
      std::string library = e.libraries.front();
      std::erase_if(library, [](char c) { return c == '*' || c == '?'; });
      if (!dts::glob_match(e.libraries.front(), library)) continue;  // '?' needs a character
      dts::ExpectationJudge judge({file});
      dts::Record record = row_for(e, library, e.deviations);
      judge.apply(record);
      // Kinds that the detail grammar cannot carry whole (", " or ": " inside) may not read back.
      const bool plain = std::none_of(e.deviations.begin(), e.deviations.end(), [](const std::string& k) {
        return k.find(", ") != std::string::npos || k.find(": ") != std::string::npos || k.find("; ") != std::string::npos ||
               k.find('(') != std::string::npos || k.find(')') != std::string::npos;
      });
      if (plain && dts::deviation_kinds(record.detail) == e.deviations) {
        DTS_FUZZ_CHECK(record.verdict == dts::Verdict::xfail || record.verdict == dts::Verdict::fail,
                       "a failed row judged to neither xfail nor fail");
      }
      dts::Record other = row_for(e, library, {"wrong value (fuzz)"});
      judge.apply(other);
      if (std::find(e.deviations.begin(), e.deviations.end(), "wrong value (fuzz)") == e.deviations.end()) {
        DTS_FUZZ_CHECK(other.verdict == dts::Verdict::fail, "a kind no entry names was expected");
      }
      (void)judge.summary();
    }
  } catch (const dts::Error& e) {
    DTS_FUZZ_CHECK(e.kind() == dts::Error::Kind::invalid_argument, "a bad expectation file is not invalid_argument");
    DTS_FUZZ_CHECK(std::string(e.what()).rfind(path + ":", 0) == 0, "the message does not start with PATH:");
    dts::fuzz::check_one_line(e.what());
  }
  return 0;
}

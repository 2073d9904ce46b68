// Which records a hand-written rule is about: the selector keys shared by acceptance profiles'
// [[threshold]] tables and expectation files' [[expect]] tables (suite, op, dtype, strategy,
// placement, backend, device, config, bytes, world_size). An empty list or an unset bound matches
// anything.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "results/record.h"
#include "results/toml_reader.h"

namespace dts {

struct RecordSelector {
  std::vector<std::string> suites, ops, dtypes, strategies, placements, backends, devices;
  // Every key=value pair here must appear in the record's `config` (e.g. redop=sum, dp=4).
  std::vector<std::pair<std::string, std::string>> config;
  int64_t min_bytes = -1, max_bytes = -1;      // -1: unbounded; a bytes bound never matches bytes -1
  int min_world_size = 0, max_world_size = 0;  // 0: unbounded
};

bool matches(const RecordSelector& selector, const Record& record);

// "all_reduce, f32, redop=sum, bytes >= 1024": the selector's parts, for summaries.
std::vector<std::string> describe_parts(const RecordSelector& selector);

// The names a selector accepts: the suites of this build (results/catalog.h), the collectives
// (records' `op`), the strategies, the placements.
const std::vector<std::string_view>& known_suites();
const std::vector<std::string_view>& known_collectives();
const std::vector<std::string_view>& known_strategies();
const std::vector<std::string_view>& known_placements();

// Reads `key` into `selector` when it is a selector key (suite, op, dtype, strategy, placement,
// backend, device, config, bytes, min_bytes, max_bytes, world_size, min_world_size,
// max_world_size), checking its value; false for any other key. `where` names the table in
// messages ("[[threshold]] #3").
bool read_selector_key(const TomlReader& reader, const std::string& key, const toml::node& node,
                       const std::string& where, RecordSelector& selector);
inline const std::vector<std::string_view> kSelectorKeys{
    "suite",     "op",        "dtype", "strategy",   "placement",      "backend",       "device",
    "config",    "min_bytes", "max_bytes", "bytes", "world_size", "min_world_size", "max_world_size"};

// Refuses a selector that can match nothing (min_bytes > max_bytes, ...), at `line`.
void check_selector(const TomlReader& reader, int line, const std::string& where, const RecordSelector& selector);

}  // namespace dts

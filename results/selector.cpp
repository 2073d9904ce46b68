#include "results/selector.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "core/dtype.h"
#include "core/error.h"
#include "results/catalog.h"

namespace dts {

namespace {

bool any_of(const std::vector<std::string>& allowed, const std::string& value) {
  return allowed.empty() || std::find(allowed.begin(), allowed.end(), value) != allowed.end();
}

}  // namespace

const std::vector<std::string_view>& known_suites() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> list;
    for (const SuiteInfo& info : suite_catalog()) list.push_back(info.name);
    return list;
  }();
  static const std::vector<std::string_view> views(names.begin(), names.end());
  return views;
}

const std::vector<std::string_view>& known_collectives() {
  static const std::vector<std::string_view> names{"all_reduce", "reduce_scatter", "all_gather", "broadcast",
                                                   "reduce",     "all_to_all",     "send_recv"};
  return names;
}

const std::vector<std::string_view>& known_strategies() {
  static const std::vector<std::string_view> names{"ddp", "zero1", "zero2", "zero3", "tp", "gpipe",
                                                   "1f1b", "hybrid", "ps-sync", "ps-async", "ps-ssp", "ps-backup"};
  return names;
}

const std::vector<std::string_view>& known_placements() {
  static const std::vector<std::string_view> names{"in_place", "out_of_place"};
  return names;
}

bool matches(const RecordSelector& t, const Record& record) {
  const Labels& l = record.labels;
  if (!any_of(t.suites, record.suite) || !any_of(t.ops, l.op) || !any_of(t.dtypes, l.dtype) ||
      !any_of(t.strategies, l.strategy) || !any_of(t.placements, l.placement) || !any_of(t.backends, l.backend)) {
    return false;
  }
  if (!t.devices.empty()) {
    // "cuda" selects every CUDA device; "cuda:NVIDIA H100 80GB HBM3" one model.
    const std::string kind = l.device.substr(0, l.device.find(':'));
    if (!any_of(t.devices, l.device) && !any_of(t.devices, kind)) return false;
  }
  if (!t.config.empty()) {
    std::set<std::pair<std::string, std::string>> have;
    std::stringstream pairs(l.config);
    for (std::string pair; std::getline(pairs, pair, ';');) {
      const size_t eq = pair.find('=');
      if (eq != std::string::npos) have.emplace(pair.substr(0, eq), pair.substr(eq + 1));
    }
    for (const auto& want : t.config) {
      if (!have.count(want)) return false;
    }
  }
  if (t.min_bytes >= 0 || t.max_bytes >= 0) {
    if (l.bytes < 0) return false;
    if (t.min_bytes >= 0 && l.bytes < t.min_bytes) return false;
    if (t.max_bytes >= 0 && l.bytes > t.max_bytes) return false;
  }
  if (t.min_world_size > 0 && l.world_size < t.min_world_size) return false;
  if (t.max_world_size > 0 && l.world_size > t.max_world_size) return false;
  return true;
}

std::vector<std::string> describe_parts(const RecordSelector& t) {
  std::vector<std::string> parts;
  const auto list = [&](const std::vector<std::string>& items) {
    std::string joined;
    for (const auto& item : items) joined += (joined.empty() ? "" : "|") + item;
    if (!joined.empty()) parts.push_back(joined);
  };
  list(t.suites);
  list(t.ops);
  list(t.dtypes);
  list(t.strategies);
  list(t.placements);
  list(t.backends);
  list(t.devices);
  for (const auto& [key, value] : t.config) parts.push_back(key + "=" + value);
  if (t.min_bytes >= 0 && t.min_bytes == t.max_bytes) {
    parts.push_back("bytes = " + std::to_string(t.min_bytes));
  } else {
    if (t.min_bytes >= 0) parts.push_back("bytes >= " + std::to_string(t.min_bytes));
    if (t.max_bytes >= 0) parts.push_back("bytes <= " + std::to_string(t.max_bytes));
  }
  if (t.min_world_size > 0 && t.min_world_size == t.max_world_size) {
    parts.push_back("world_size = " + std::to_string(t.min_world_size));
  } else {
    if (t.min_world_size > 0) parts.push_back("world_size >= " + std::to_string(t.min_world_size));
    if (t.max_world_size > 0) parts.push_back("world_size <= " + std::to_string(t.max_world_size));
  }
  return parts;
}

bool read_selector_key(const TomlReader& reader, const std::string& name, const toml::node& node,
                       const std::string& where, RecordSelector& t) {
  const std::string what = "'" + name + "' of " + where;
  if (name == "suite") {
    t.suites = reader.names_of(node, what, "suite", known_suites());
  } else if (name == "op") {
    t.ops = reader.names_of(node, what, "op", known_collectives());
  } else if (name == "dtype") {
    for (const auto& d : reader.strings_of(node, what)) {
      try {
        t.dtypes.emplace_back(dts::name(parse_dtype(d)));  // "float" -> "f32", as records spell it
      } catch (const Error& e) {
        reader.fail(node, std::string(e.what()) + " in " + where);
      }
    }
  } else if (name == "strategy") {
    t.strategies = reader.names_of(node, what, "strategy", known_strategies());
  } else if (name == "placement") {
    t.placements = reader.names_of(node, what, "placement", known_placements());
  } else if (name == "backend") {
    t.backends = reader.strings_of(node, what);
  } else if (name == "device") {
    t.devices = reader.strings_of(node, what);
  } else if (name == "config") {
    std::stringstream pairs(reader.string_of(node, what));
    for (std::string pair; std::getline(pairs, pair, ';');) {
      const size_t eq = pair.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == pair.size()) {
        reader.fail(node, "bad config pair '" + pair + "' in " + where + " (expected key=value;key=value)");
      }
      t.config.emplace_back(pair.substr(0, eq), pair.substr(eq + 1));
    }
  } else if (name == "min_bytes") {
    t.min_bytes = reader.bytes_of(node, what);
  } else if (name == "max_bytes") {
    t.max_bytes = reader.bytes_of(node, what);
  } else if (name == "bytes") {
    t.min_bytes = t.max_bytes = reader.bytes_of(node, what);
  } else if (name == "world_size" || name == "min_world_size" || name == "max_world_size") {
    const int64_t n = reader.integer_of(node, what);
    if (n < 1 || n > (1 << 24)) reader.fail(node, what + " must be a rank count from 1");
    if (name != "max_world_size") t.min_world_size = static_cast<int>(n);
    if (name != "min_world_size") t.max_world_size = static_cast<int>(n);
  } else {
    return false;
  }
  return true;
}

void check_selector(const TomlReader& reader, int line, const std::string& where, const RecordSelector& t) {
  if (t.min_bytes >= 0 && t.max_bytes >= 0 && t.min_bytes > t.max_bytes) {
    reader.fail(line, where + ": min_bytes " + std::to_string(t.min_bytes) + " > max_bytes " + std::to_string(t.max_bytes));
  }
  if (t.min_world_size > 0 && t.max_world_size > 0 && t.min_world_size > t.max_world_size) {
    reader.fail(line, where + ": min_world_size " + std::to_string(t.min_world_size) + " > max_world_size " +
                          std::to_string(t.max_world_size));
  }
}

}  // namespace dts

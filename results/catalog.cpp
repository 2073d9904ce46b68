// The suite catalog (results/catalog.h).
#include "results/catalog.h"

#include <algorithm>
#include <map>

namespace dts {

namespace {
std::map<std::string, SuiteInfo>& catalog() {
  static std::map<std::string, SuiteInfo> entries;
  return entries;
}
}  // namespace

bool register_suite_info(SuiteInfo info) {
  std::string name = info.name;
  catalog()[std::move(name)] = std::move(info);
  return true;
}

std::vector<SuiteInfo> suite_catalog() {
  std::vector<SuiteInfo> entries;
  for (const auto& [name, info] : catalog()) entries.push_back(info);
  return entries;
}

std::vector<std::string> suite_label_keys(const std::string& name) {
  const auto it = catalog().find(name);
  return it == catalog().end() ? std::vector<std::string>{} : it->second.label_keys;
}

std::vector<std::string> catalog_metrics() {
  std::vector<std::string> names{"check"};
  for (const auto& [suite, info] : catalog()) {
    for (const MetricInfo& m : info.metrics) {
      if (std::find(names.begin(), names.end(), m.name) == names.end()) names.push_back(m.name);
    }
  }
  return names;
}

std::vector<DeviationKind> catalog_deviation_kinds() {
  std::vector<DeviationKind> kinds;
  for (const auto& [suite, info] : catalog()) kinds.insert(kinds.end(), info.deviation_kinds.begin(), info.deviation_kinds.end());
  return kinds;
}

std::string record_key(const Record& record, const std::string& key) {
  const Labels& l = record.labels;
  if (key == "op") return l.op;
  if (key == "dtype") return l.dtype;
  if (key == "strategy") return l.strategy;
  if (key == "placement") return l.placement;
  if (key == "backend") return l.backend;
  if (key == "device") return l.device;
  return config_value(l.config, key).value_or("");
}

}  // namespace dts

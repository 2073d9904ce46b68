// Suite and flag-group registries: suites register by name beside their definition
// (DTS_REGISTER_SUITE, DTS_REGISTER_FLAGS).
#include "suites/suite.h"

#include <map>

namespace dts {

namespace {
std::map<std::string, SuiteFactory>& suite_registry() {
  static std::map<std::string, SuiteFactory> registry;
  return registry;
}
std::map<std::string, FlagGroupEntry>& flag_registry() {
  static std::map<std::string, FlagGroupEntry> registry;
  return registry;
}
}  // namespace

bool register_suite(SuiteInfo info, SuiteFactory factory) {
  suite_registry()[info.name] = std::move(factory);
  return register_suite_info(std::move(info));
}

std::vector<std::string> registered_suites() {
  std::vector<std::string> names;
  for (auto& [name, factory] : suite_registry()) names.push_back(name);
  return names;
}

std::unique_ptr<Suite> make_suite(std::string_view name) {
  auto it = suite_registry().find(std::string(name));
  if (it == suite_registry().end()) {
    std::string known;
    for (auto& [n, f] : suite_registry()) known += (known.empty() ? "" : ", ") + n;
    throw Error(Error::Kind::invalid_argument, "unknown suite '" + std::string(name) + "' (this build has: " + known + ")");
  }
  return it->second();
}

bool register_flag_group(std::string name, std::string title, FlagGroupFactory factory) {
  FlagGroupEntry entry{name, std::move(title), std::move(factory)};
  flag_registry()[std::move(name)] = std::move(entry);
  return true;
}

std::vector<FlagGroupEntry> registered_flag_groups() {
  std::vector<FlagGroupEntry> entries;
  for (auto& [name, entry] : flag_registry()) entries.push_back(entry);
  return entries;
}

}  // namespace dts

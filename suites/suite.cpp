// Suite registry: suites register by name beside their definition (DTS_REGISTER_SUITE).
#include "suites/suite.h"

#include <map>

namespace dts {

namespace {
std::map<std::string, SuiteFactory>& suite_registry() {
  static std::map<std::string, SuiteFactory> registry;
  return registry;
}
}  // namespace

bool register_suite(std::string name, SuiteFactory factory) {
  suite_registry()[std::move(name)] = std::move(factory);
  return true;
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

}  // namespace dts

// CPUs and machines (core/cpus.h).
#include "core/cpus.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

namespace dts {

std::string allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "";
  std::string text;
  for (int c = 0; c < CPU_SETSIZE;) {
    if (!CPU_ISSET(c, &set)) {
      ++c;
      continue;
    }
    int end = c;
    while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, &set)) ++end;
    text += (text.empty() ? "" : ",") + std::to_string(c) + (end > c ? "-" + std::to_string(end) : "");
    c = end + 1;
  }
  return text;
}

std::vector<int> cpu_list(const std::string& text) {
  std::vector<int> cpus;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    const std::string part = text.substr(at, end - at);
    const size_t dash = part.find('-');
    if (!part.empty() && part[0] >= '0' && part[0] <= '9') {
      const int lo = std::atoi(part.c_str());
      const int hi = dash == std::string::npos ? lo : std::atoi(part.c_str() + dash + 1);
      for (int c = std::max(lo, 0); c <= hi && c < CPU_SETSIZE; ++c) cpus.push_back(c);
    }
    at = end + 1;
  }
  return cpus;
}

std::vector<CpuSharing> cpu_sharing(const std::vector<std::string>& group_of_rank,
                                    const std::vector<std::string>& cpus_of_rank) {
  std::map<std::string, std::set<int>> cpus;
  std::map<std::string, int> ranks;
  for (size_t r = 0; r < group_of_rank.size(); ++r) {
    ++ranks[group_of_rank[r]];
    for (int cpu : cpu_list(r < cpus_of_rank.size() ? cpus_of_rank[r] : "")) cpus[group_of_rank[r]].insert(cpu);
  }
  std::vector<CpuSharing> out;
  for (const std::string& group : group_of_rank) {
    out.push_back({ranks[group], static_cast<int>(cpus[group].size())});
  }
  return out;
}

std::string machine_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

}  // namespace dts

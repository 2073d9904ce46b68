// CPUs and machines (core/cpus.h).
#include "core/cpus.h"

#include "core/ranges.h"

#include <sched.h>

#include <fstream>
#include <map>
#include <set>

namespace dts {

std::string allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "";
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return format_ranges(cpus);
}

std::vector<int> cpu_list(const std::string& text) { return parse_ranges(text, CPU_SETSIZE); }

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

// The CPUs this process may run on, and where it runs: what tells a machine with more ranks than
// cores apart (the hardware suite's concurrent mode, the topology suite's peers).
#pragma once
#include <string>
#include <vector>

namespace dts {

// The CPUs this process may run on (its affinity), as ranges: "0-3,8"; "" when it cannot be read.
std::string allowed_cpus();

// "0-3,8" -> 0 1 2 3 8 (allowed_cpus' text; parse_ranges of core/ranges.h below CPU_SETSIZE).
std::vector<int> cpu_list(const std::string& text);

// Per rank: how many ranks share its group (a node, a machine: `group_of_rank`) and how many
// distinct CPUs they may use between them (`cpus_of_rank`, each in allowed_cpus' spelling). Where
// ranks outnumber CPUs, which of them gets a core is the scheduler's doing.
struct CpuSharing {
  int ranks = 0, cpus = 0;
};
std::vector<CpuSharing> cpu_sharing(const std::vector<std::string>& group_of_rank,
                                    const std::vector<std::string>& cpus_of_rank);

// What names the running kernel, alike for every process of one machine whatever its network or
// UTS namespace (/proc/sys/kernel/random/boot_id): ranks that share it share the machine's CPUs.
// "" when it cannot be read.
std::string machine_id();

}  // namespace dts

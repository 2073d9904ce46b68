// CPU lists and the machine's id (core/cpus.h).
#include "core/cpus.h"

#include <gtest/gtest.h>

namespace dts {
namespace {

TEST(Cpus, RangesBothWays) {
  EXPECT_EQ(cpu_list("0-3,8"), (std::vector<int>{0, 1, 2, 3, 8}));
  EXPECT_EQ(cpu_list(""), std::vector<int>{});
  EXPECT_EQ(cpu_list("5"), std::vector<int>{5});
  EXPECT_EQ(cpu_list("x,2"), std::vector<int>{2});  // not a number: left out
  // What this process may use reads back as at least one CPU, and in its own spelling.
  const std::string mine = allowed_cpus();
  ASSERT_FALSE(mine.empty());
  EXPECT_FALSE(cpu_list(mine).empty());
}

TEST(Cpus, SharingCountsRanksAndDistinctCpusPerGroup) {
  // Node a: ranks 0 and 2 on CPUs 0-1 and 1 (2 distinct CPUs); node b: rank 1 on none it can say.
  const auto s = cpu_sharing({"a", "b", "a"}, {"0-1", "", "1"});
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].ranks, 2);
  EXPECT_EQ(s[0].cpus, 2);
  EXPECT_EQ(s[2].cpus, 2);
  EXPECT_EQ(s[1].ranks, 1);
  EXPECT_EQ(s[1].cpus, 0);
}

TEST(Cpus, TheMachineIdIsTheKernelsAndStable) {
  const std::string id = machine_id();
  EXPECT_EQ(id.size(), 36u) << id;  // a UUID: 8-4-4-4-12 hex digits
  EXPECT_EQ(machine_id(), id);
}

}  // namespace
}  // namespace dts

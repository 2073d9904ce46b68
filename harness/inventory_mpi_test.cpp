// gather_inventories at 1-4 ranks: every rank's inventory, of a different length on each rank,
// arrives whole and in rank order on every rank.
#include <gtest/gtest.h>

#include "comm/communicator.h"
#include "harness/inventory.h"

namespace dts {
namespace {

TEST(GatherInventories, EveryRanksWholeOnEveryRank) {
  const std::unique_ptr<Communicator> control = make_communicator("mpi");
  RankInventory mine;
  mine.rank = control->rank();
  mine.node = "n" + std::to_string(control->rank() / 2);
  mine.cpu_model = std::string(static_cast<size_t>(1 + 100 * control->rank()), 'x');  // lengths differ
  for (int i = 0; i < control->rank(); ++i) mine.nics.push_back({"eth" + std::to_string(i), "ethernet", 1e9 * i});
  const std::vector<RankInventory> all = gather_inventories(*control, mine);
  ASSERT_EQ(all.size(), static_cast<size_t>(control->size()));
  for (int r = 0; r < control->size(); ++r) {
    const RankInventory& got = all[static_cast<size_t>(r)];
    EXPECT_EQ(got.rank, r);
    EXPECT_EQ(got.node, "n" + std::to_string(r / 2));
    EXPECT_EQ(got.cpu_model.size(), static_cast<size_t>(1 + 100 * r));
    ASSERT_EQ(got.nics.size(), static_cast<size_t>(r));
    if (r > 0) {
      EXPECT_EQ(got.nics.back().bits_per_second, 1e9 * (r - 1));
    }
  }
}

}  // namespace
}  // namespace dts

// One-process tests of faulty(KIND,INNER)'s set-up checks, over a fake inner communicator (no MPI,
// no device): a kind that touches data over device memory is refused when the communicator is
// made, an invalid_argument the harness reports as a set-up error (exit 2), never a silent SKIP;
// and split() groups find the victim process through INNER.
#include "comm/faulty/faulty_communicator.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "comm/testing/fake_communicator.h"

namespace dts {
namespace {

using testing::FakeCommunicator;

TEST(FaultyOverDeviceMemory, DataKindsAreRefusedAtSetUp) {
  for (const char* kind : {"bitflip", "drop", "stale"}) {
    try {
      FaultyCommunicator faulty(parse_fault_spec(kind), std::make_unique<FakeCommunicator>("fakegpu", Memory::device),
                                CommOptions{});
      ADD_FAILURE() << kind << " over device memory was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::invalid_argument) << e.what();
      // One line that says what, over what, and why.
      const std::string what = e.what();
      EXPECT_NE(what.find(std::string("fault kind ") + kind), std::string::npos) << what;
      EXPECT_NE(what.find("fakegpu"), std::string::npos) << what;
      EXPECT_NE(what.find("device memory"), std::string::npos) << what;
    }
  }
}

TEST(FaultyOverDeviceMemory, TimingKindsAreAccepted) {
  // hang and delay never read the data, so they work over any memory.
  for (const char* kind : {"hang", "delay(0)"}) {
    FaultyCommunicator faulty(parse_fault_spec(kind), std::make_unique<FakeCommunicator>("fakegpu", Memory::device),
                              CommOptions{});
    EXPECT_EQ(faulty.backend(), "faulty(" + std::string(kind) + ",fakegpu)");
    EXPECT_EQ(faulty.memory(), Memory::device);
  }
}

TEST(FaultyOverHostMemory, DataKindsAreAccepted) {
  FaultyCommunicator faulty(parse_fault_spec("bitflip"), std::make_unique<FakeCommunicator>("fakecpu"), CommOptions{});
  EXPECT_EQ(faulty.backend(), "faulty(bitflip,fakecpu)");
  EXPECT_EQ(faulty.victim(), 0);
}

TEST(FaultySplit, GroupsFindTheVictimWithOneAllReduceOnInner) {
  // One rank: the job's victim (rank 0) is in every group, and a group of a group keeps it.
  auto log = std::make_shared<FakeCommunicator::Log>();
  FaultyCommunicator faulty(parse_fault_spec("drop"), std::make_unique<FakeCommunicator>("fake", Memory::host, log),
                            CommOptions{});
  auto group = faulty.split(0, 0);
  auto subgroup = group->split(0, 0);
  EXPECT_EQ(dynamic_cast<const FaultyCommunicator&>(*group).victim(), 0);
  EXPECT_EQ(dynamic_cast<const FaultyCommunicator&>(*subgroup).victim(), 0);
  // The look-up reaches INNER directly: through the wrapper, drop would have replaced it.
  EXPECT_EQ(*log, (FakeCommunicator::Log{"split", "all_reduce", "split", "all_reduce"}));
}

}  // namespace
}  // namespace dts

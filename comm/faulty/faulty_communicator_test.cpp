// One-process tests of faulty(KIND,INNER)'s set-up checks, over a fake inner communicator (no MPI,
// no device): a kind that touches data over device memory is refused when the communicator is
// made, an invalid_argument the harness reports as a set-up error (exit 2), never a silent SKIP;
// split() groups find the victim process through INNER; and abort leaves the communicator
// refusing every call, as nccl's aborted one does.
#include "comm/faulty/faulty_communicator.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <set>
#include <vector>
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

TEST(FaultyAbort, TheArmedCallThrowsAndEveryLaterCallIsRefused) {
  FaultyCommunicator::rearm_abort();
  auto log = std::make_shared<FakeCommunicator::Log>();
  CommOptions options;
  options.fault_after_calls = 1;  // the first collective runs clean: the abort strikes mid-run
  FaultyCommunicator faulty(parse_fault_spec("abort"), std::make_unique<FakeCommunicator>("fake", Memory::host, log),
                            options);
  EXPECT_EQ(faulty.backend(), "faulty(abort,fake)");
  float value = 1;
  faulty.all_reduce(&value, &value, 1, DType::f32, ReduceOp::sum);
  EXPECT_FALSE(faulty.aborted());
  try {
    faulty.all_reduce(&value, &value, 1, DType::f32, ReduceOp::sum);
    ADD_FAILURE() << "the armed call returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::backend) << e.what();  // a stack's error: FAIL, not SKIP
  }
  EXPECT_TRUE(faulty.aborted());
  // Every kind of call is refused now, and none reaches INNER: the clean call's all_reduce only.
  const auto refused = [](const std::function<void()>& call) {
    try {
      call();
      return false;
    } catch (const Error& e) {
      return e.kind() == Error::Kind::backend && std::string(e.what()).find("aborted") != std::string::npos;
    }
  };
  EXPECT_TRUE(refused([&] { faulty.broadcast(&value, &value, 1, DType::f32, 0); }));
  EXPECT_TRUE(refused([&] { faulty.send(&value, 1, DType::f32, 0); }));
  EXPECT_TRUE(refused([&] { faulty.barrier(); }));
  EXPECT_TRUE(refused([&] { faulty.synchronize(); }));
  EXPECT_TRUE(refused([&] { (void)faulty.split(0, 0); }));
  EXPECT_TRUE(refused([&] { (void)faulty.all_reduce_async(&value, &value, 1, DType::f32, ReduceOp::sum); }));
  EXPECT_EQ(*log, (FakeCommunicator::Log{"all_reduce"}));
}

TEST(FaultyAbort, StrikesOncePerProcessSoTheReplacementRunsClean) {
  FaultyCommunicator::rearm_abort();
  float value = 1;
  FaultyCommunicator first(parse_fault_spec("abort"), std::make_unique<FakeCommunicator>("fake"), CommOptions{});
  EXPECT_THROW(first.all_reduce(&value, &value, 1, DType::f32, ReduceOp::sum), Error);
  EXPECT_TRUE(first.aborted());
  // What the harness makes after an aborted case: the same spec and options, and it runs.
  auto log = std::make_shared<FakeCommunicator::Log>();
  FaultyCommunicator second(parse_fault_spec("abort"), std::make_unique<FakeCommunicator>("fake", Memory::host, log),
                            CommOptions{});
  second.all_reduce(&value, &value, 1, DType::f32, ReduceOp::sum);
  second.barrier();
  EXPECT_FALSE(second.aborted());
  EXPECT_EQ(*log, (FakeCommunicator::Log{"all_reduce", "barrier"}));
}

TEST(FaultyAbort, AbortGivesUpALiveCommunicator) {
  // The harness's call on the ranks whose own communicator is live when another rank's is not.
  FaultyCommunicator faulty(parse_fault_spec("delay(0)"), std::make_unique<FakeCommunicator>("fake"), CommOptions{});
  EXPECT_FALSE(faulty.aborted());
  faulty.abort();
  EXPECT_TRUE(faulty.aborted());
  EXPECT_THROW(faulty.barrier(), Error);
}

// --fault-rate: of the armed calls, the fraction P is faulted, the same calls for the same seed
// (every rank of a job agrees) and other calls for another seed. Over a fake inner that leaves
// the output alone, a bitflip is seen as the output's one element turning from 0 to 1.
std::vector<int> flipped_calls(double rate, uint64_t seed, int calls) {
  CommOptions options;
  options.fault_rate = rate;
  options.fault_seed = seed;
  FaultyCommunicator faulty(parse_fault_spec("bitflip"), std::make_unique<FakeCommunicator>("fake"), options);
  std::vector<int> flipped;
  for (int call = 0; call < calls; ++call) {
    int32_t in = 0, out = 0;
    faulty.all_reduce(&in, &out, 1, DType::i32, ReduceOp::sum);
    if (out != 0) flipped.push_back(call);
  }
  return flipped;
}

TEST(FaultyRate, StrikesTheStatedFractionOfCallsAlikeForOneSeed) {
  constexpr int kCalls = 5000;
  EXPECT_EQ(flipped_calls(1.0, 7, 100).size(), 100u);  // rate 1: every call, as without the flag
  const std::vector<int> a = flipped_calls(0.02, 7, kCalls);
  // Binomial(5000, 0.02): mean 100, sd 9.9; 50 and 150 are 5 sd out (a chance below 1e-6 each).
  EXPECT_GE(a.size(), 50u);
  EXPECT_LE(a.size(), 150u);
  EXPECT_EQ(flipped_calls(0.02, 7, kCalls), a);  // the same calls: every rank agrees
  EXPECT_NE(flipped_calls(0.02, 8, kCalls), a);  // another seed, other calls
  // Not periodic: the gaps between struck calls are not all one length (a fixed period could
  // fall in step with a suite's own cycle of calls and strike only timed, never checked, ones).
  std::set<int> gaps;
  for (size_t i = 1; i < a.size(); ++i) gaps.insert(a[i] - a[i - 1]);
  EXPECT_GT(gaps.size(), 10u);
}

}  // namespace
}  // namespace dts

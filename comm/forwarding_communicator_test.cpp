// One-process tests of ForwardingCommunicator: a wrapper that overrides nothing forwards every
// operation of Communicator to INNER (none falls to the unsupported default), names itself
// NAME(ARGS,INNER) and splits into wrappers of INNER's groups. Run: ctest -R forwarding_test
#include "comm/forwarding_communicator.h"

#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "comm/testing/fake_communicator.h"

namespace dts {
namespace {

using testing::FakeCommunicator;

// The smallest wrapper: everything comes from the base.
class PlainWrapper final : public ForwardingCommunicator {
 public:
  explicit PlainWrapper(std::unique_ptr<Communicator> inner, std::string_view leading_args = {})
      : ForwardingCommunicator(std::move(inner), "plain", leading_args) {}

 private:
  std::unique_ptr<Communicator> wrap(std::unique_ptr<Communicator> inner_group) override {
    return std::make_unique<PlainWrapper>(std::move(inner_group));
  }
};

TEST(ForwardingCommunicator, ForwardsEveryOperation) {
  auto fake = std::make_unique<FakeCommunicator>("fake", Memory::device);
  const auto log = fake->log();
  PlainWrapper wrapper(std::move(fake));
  EXPECT_EQ(wrapper.backend(), "plain(fake)");
  EXPECT_EQ(wrapper.version(), "fake 1.0");
  EXPECT_EQ(wrapper.rank(), 0);
  EXPECT_EQ(wrapper.size(), 1);
  EXPECT_EQ(wrapper.memory(), Memory::device);

  std::array<float, 1> in{1}, out{0};
  const DType f32 = DType::f32;
  wrapper.all_reduce(in.data(), out.data(), 1, f32, ReduceOp::sum);
  wrapper.reduce_scatter(in.data(), out.data(), 1, f32, ReduceOp::sum);
  wrapper.all_gather(in.data(), out.data(), 1, f32);
  wrapper.broadcast(in.data(), out.data(), 1, f32, 0);
  wrapper.reduce(in.data(), out.data(), 1, f32, ReduceOp::sum, 0);
  wrapper.all_to_all(in.data(), out.data(), 1, f32);
  wrapper.send(in.data(), 1, f32, 0);
  wrapper.recv(out.data(), 1, f32, 0);
  wrapper.send_recv(in.data(), 0, out.data(), 0, 1, f32);
  wrapper.isend(in.data(), 1, f32, 0)->wait();
  wrapper.irecv(out.data(), 1, f32, 0)->wait();
  wrapper.all_reduce_async(in.data(), out.data(), 1, f32, ReduceOp::sum)->wait();
  wrapper.barrier();
  // Each operation reached INNER once, as itself: none threw unsupported, none was rerouted
  // (the base class's async defaults would have logged send, recv and all_reduce instead).
  EXPECT_EQ(*log, (std::vector<std::string>{"all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce",
                                            "all_to_all", "send", "recv", "send_recv", "isend", "irecv",
                                            "all_reduce_async", "barrier"}));
}

TEST(ForwardingCommunicator, SplitWrapsTheInnerGroup) {
  auto fake = std::make_unique<FakeCommunicator>();
  const auto log = fake->log();
  PlainWrapper wrapper(std::move(fake));
  auto group = wrapper.split(0, 0);
  ASSERT_NE(dynamic_cast<PlainWrapper*>(group.get()), nullptr);
  EXPECT_EQ(group->backend(), "plain(fake)");
  group->barrier();
  EXPECT_EQ(*log, (std::vector<std::string>{"split", "barrier"}));
}

TEST(ForwardingCommunicator, SpecCarriesLeadingArguments) {
  PlainWrapper wrapper(std::make_unique<FakeCommunicator>("inner"), "a,b");
  EXPECT_EQ(wrapper.backend(), "plain(a,b,inner)");
}

TEST(ForwardingCommunicator, NullInnerIsAnInvalidArgumentNamingTheWrapper) {
  try {
    PlainWrapper wrapper(nullptr);
    ADD_FAILURE() << "built a wrapper of nothing";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("plain"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dts

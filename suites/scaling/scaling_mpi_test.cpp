// The scaling suite's timing on real sub-worlds under mpirun (NP 1 2 3 4): every size of
// scaling_world_sizes(W), split from the job as the suite splits it (the stack under test and an
// untampered control communicator), times ddp and all_reduce and checks what the numbers must be
// (finite, positive, the slowest member's and so the same on every member, throughput = work /
// time), that every strategy runs the layout scaling_layout gives it, and that bad input fails on
// every member alike instead of hanging. Nothing is asserted about speed: the machine is shared.
//   ctest -R scaling_mpi_test   (or mpirun -np 3 build/suites/scaling/scaling_mpi_test)
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/error.h"
#include "suites/scaling/scaling.h"

namespace dts {
namespace {

const ModelSpec kModel;            // the suite's default model: 3 layers of width 64
constexpr int kMicrobatches = 4;   // the pipeline's m, as the harness's default
constexpr int64_t kPerRankRows = 8;  // weak scaling: 8 rows per rank (>= 1 row per dp replica)
// Strong scaling: one global batch for every n <= 4 ranks: >= 4 x kMicrobatches rows (scaled_batch).
constexpr int64_t kGlobalRows = 16;
constexpr int kWarmup = 1, kIters = 3;  // 3 timed steps: a median that is not just one sample

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// The first n ranks of the job, split from both the stack and the control communicator as the
// suite does (collective over the job: every rank calls it, members or not).
struct SubWorld {
  std::unique_ptr<Communicator> members, control_members;
  bool member = false;
  SubWorld(Communicator& stack, Communicator& control, int n) {
    const int rank = control.rank();
    member = rank < n;
    members = stack.split(member ? 0 : 1, rank);
    control_members = control.split(member ? 0 : 1, rank);
  }
};

class ScalingMpiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    stack_ = make_communicator("mpi");
    control_ = make_communicator("mpi");
  }
  std::unique_ptr<Communicator> stack_, control_;
};

// What every point must satisfy on every member: n, finite positive times, the median among the
// samples, the same bits on every member (each sample is the max over members, all_reduced), and
// throughput = work / seconds.
void expect_consistent_point(Communicator& control_members, const ScalingPoint& point, int n, int64_t work) {
  EXPECT_EQ(point.n, n);
  EXPECT_EQ(point.work_per_step, work);
  ASSERT_EQ(point.samples.size(), static_cast<size_t>(kIters));
  for (double s : point.samples) {
    EXPECT_TRUE(std::isfinite(s) && s > 0) << s;  // a step takes time; two clock reads bound it away from 0
  }
  EXPECT_TRUE(std::isfinite(point.seconds_per_step) && point.seconds_per_step > 0);
  EXPECT_GE(point.seconds_per_step, *std::min_element(point.samples.begin(), point.samples.end()));
  EXPECT_LE(point.seconds_per_step, *std::max_element(point.samples.begin(), point.samples.end()));
  // The same one division: bit-equal.
  EXPECT_EQ(point.throughput, static_cast<double>(work) / point.seconds_per_step);

  std::vector<double> mine = point.samples;
  mine.push_back(point.seconds_per_step);
  std::vector<double> all(mine.size() * static_cast<size_t>(control_members.size()));
  control_members.all_gather(mine.data(), all.data(), mine.size(), DType::f64);
  for (int r = 0; r < control_members.size(); ++r) {
    EXPECT_EQ(std::memcmp(all.data() + r * mine.size(), mine.data(), mine.size() * sizeof(double)), 0)
        << "member " << r << " reports other times than member " << control_members.rank();
  }
}

TEST_F(ScalingMpiTest, DdpOnEverySubWorldWeakAndStrong) {
  const StrategySpec ddp = parse_strategy_spec("ddp");
  for (int n : scaling_world_sizes(world_size())) {
    SubWorld sub(*stack_, *control_, n);
    if (!sub.member) continue;
    for (ScalingMode mode : {ScalingMode::weak, ScalingMode::strong}) {
      SCOPED_TRACE(std::string(name(mode)) + " n=" + std::to_string(n));
      const int64_t batch = scaled_batch(mode, n, mode == ScalingMode::weak ? kPerRankRows : kGlobalRows);
      const auto layout = scaling_layout(ddp, n, kModel, batch, kMicrobatches);
      ASSERT_TRUE(layout.has_value());
      EXPECT_EQ(layout->dp, n);
      const ScalingPoint point = time_strategy_steps(*sub.members, *sub.control_members, "ddp", *layout, kModel, batch,
                                                     kWarmup, kIters);
      EXPECT_EQ(point.layout, layout->describe());
      expect_consistent_point(*sub.control_members, point, n, batch);
    }
  }
}

TEST_F(ScalingMpiTest, AllReduceOnEverySubWorld) {
  // 4 bytes: one element; 65540: an odd count (16385) past a 64 KiB protocol switch; 0: the empty
  // collective, whose throughput is 0 (its time is still measured).
  for (int64_t bytes : {int64_t{4}, int64_t{65540}, int64_t{0}}) {
    for (int n : scaling_world_sizes(world_size())) {
      SubWorld sub(*stack_, *control_, n);
      if (!sub.member) continue;
      SCOPED_TRACE("bytes=" + std::to_string(bytes) + " n=" + std::to_string(n));
      const ScalingPoint point = time_all_reduce(*sub.members, *sub.control_members, bytes, kWarmup, kIters);
      expect_consistent_point(*sub.control_members, point, n, bytes);
    }
  }
}

TEST_F(ScalingMpiTest, EveryStrategyRunsItsScalingLayout) {
  for (const char* strategy : {"ddp", "zero1", "zero2", "zero3", "tp", "gpipe", "1f1b", "hybrid"}) {
    const StrategySpec spec = parse_strategy_spec(strategy);
    for (int n : scaling_world_sizes(world_size())) {
      SubWorld sub(*stack_, *control_, n);
      if (!sub.member) continue;
      SCOPED_TRACE(std::string(strategy) + " n=" + std::to_string(n));
      const auto layout = scaling_layout(spec, n, kModel, kGlobalRows, kMicrobatches);
      if (!layout) {
        // Only what the model or the ranks cannot hold: more stages than layers, or hybrid
        // without two dimensions above 1 (n = 2, 3).
        EXPECT_TRUE((spec.name == "gpipe" || spec.name == "1f1b" || spec.name == "hybrid") && n > 1);
        continue;
      }
      const ScalingPoint point =
          time_strategy_steps(*sub.members, *sub.control_members, strategy, *layout, kModel, kGlobalRows, 0, kIters);
      expect_consistent_point(*sub.control_members, point, n, kGlobalRows);
    }
  }
}

TEST_F(ScalingMpiTest, BadInputFailsOnEveryMember) {
  const int n = world_size();
  ParallelConfig layout;
  layout.dp = n;
  layout.train = scaling_train_config();
  // A layout of another size than the sub-world.
  ParallelConfig too_big = layout;
  too_big.dp = n + 1;
  EXPECT_THROW(time_strategy_steps(*stack_, *control_, "ddp", too_big, kModel, kGlobalRows, 0, 1), Error);
  // Fewer rows than replicas.
  EXPECT_THROW(time_strategy_steps(*stack_, *control_, "ddp", layout, kModel, n - 1, 0, 1), Error);
  EXPECT_THROW(time_strategy_steps(*stack_, *control_, "ddp", layout, kModel, kGlobalRows, 0, 0), Error);
  EXPECT_THROW(time_all_reduce(*stack_, *control_, 6, 0, 1), Error);  // not whole f32 elements
  if (n > 1) {
    // A layout the strategy refuses (ddp does not split layers): make_strategy throws on every
    // member, which agree on it over the control communicator and all throw, none left waiting.
    ParallelConfig tensor;
    tensor.tp = n;
    tensor.train = scaling_train_config();
    try {
      time_strategy_steps(*stack_, *control_, "ddp", tensor, kModel, kGlobalRows, 0, 1);
      ADD_FAILURE() << "ddp ran a tensor-parallel layout";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::invalid_argument) << e.what();
    }
    // One member alone cannot build it (its layout has no micro-batch; make_strategy refuses it
    // before building anything); the others build ddp, whose constructor communicates nothing
    // (parameters come from Philox), and reach the agreement: all throw, the failing member its
    // own error, the others one of the same kind.
    ParallelConfig mine = layout;
    const bool odd_one = control_->rank() == n - 1;
    if (odd_one) mine.microbatches = 0;
    try {
      time_strategy_steps(*stack_, *control_, "ddp", mine, kModel, kGlobalRows, 0, 1);
      ADD_FAILURE() << "a member that could not build the strategy went unnoticed";
    } catch (const Error& e) {
      // The failing member keeps its own error; the others throw a backend error, rank 0's
      // carrying the failing member's message (the one the harness reports).
      EXPECT_EQ(e.kind(), odd_one ? Error::Kind::invalid_argument : Error::Kind::backend) << e.what();
      const std::string what = e.what();
      const bool names_the_cause = odd_one || control_->rank() == 0;
      EXPECT_NE(what.find(names_the_cause ? "micro-batches" : "another rank"), std::string::npos) << what;
    }
  }
  // Still in step: a collective over the job completes on every rank.
  control_->barrier();
}

TEST_F(ScalingMpiTest, NodeCapacityUnitesTheNodesMasks) {
  // The ranks of this node, as the harness finds them: MPI's shared-memory split, named by its
  // lowest job rank.
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank(), MPI_INFO_NULL, &node);
  int node_size = 0, leader = world_rank();
  MPI_Comm_size(node, &node_size);
  MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, node);
  MPI_Comm_free(&node);
  auto node_ranks = control_->split(leader, world_rank());
  const NodeCapacity capacity = node_capacity(*node_ranks);
  EXPECT_EQ(capacity.ranks_on_node, node_size);
  EXPECT_GE(capacity.cores, usable_cores());  // the union holds this rank's own mask
  EXPECT_EQ(capacity.oversubscribed, capacity.ranks_on_node > capacity.cores);
  // Every rank of the node sees the same union.
  int cores = capacity.cores, least = 0, most = 0;
  node_ranks->all_reduce(&cores, &least, 1, DType::i32, ReduceOp::min);
  node_ranks->all_reduce(&cores, &most, 1, DType::i32, ReduceOp::max);
  EXPECT_EQ(least, most);
}

}  // namespace
}  // namespace dts

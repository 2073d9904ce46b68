// Tests of the tree(INNER) backend under mpirun (NP 1 2 3 4: powers of two and not, so the fold of
// the extra ranks runs at 3): all_reduce, broadcast and reduce from every root against a reference
// every rank computes, and against mpi, bit for bit; the rounds and peers the schedules promise;
// the same bits on every rank; delegation, split, timeouts and errors.
// Run: ctest -R tree_mpi_test --output-on-failure
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "comm/algorithms/tree.h"
#include "comm/testing/collective_testing.h"
#include "comm/testing/fake_communicator.h"

namespace dts {
namespace {

using namespace ::dts::testing;  // the shared test pieces: inputs, references, checks, fixture
constexpr Inputs kInputs{0x7EE};  // inputs only need to be reproducible

// Counts swept: 0 and 1 are the edges; 5 and 7 are odd; 64 a power of two; 1021 is prime.
const std::vector<size_t> kCounts{0, 1, 5, 7, 64, 1021};

class TreeTest : public AlgorithmTest {
 protected:
  TreeTest() : AlgorithmTest("tree(mpi)", test_options()) {}
};

TEST_F(TreeTest, DescribesItselfAndItsInner) {
  EXPECT_EQ(comm_->backend(), "tree(mpi)");
  expect_describes_wrapper(*comm_, *mpi_, "tree");
}

TEST_F(TreeTest, AllReduceMatchesReferenceAndMpi) {
  for (const Case& c : reduction_cases(kCounts, 0)) {
    SCOPED_TRACE(case_name("all_reduce", c));
    expect_all_reduce_matches(*comm_, kInputs, c, mpi_.get());
  }
}

TEST_F(TreeTest, BroadcastFromEveryRoot) {
  uint64_t stream = 1000;  // apart from the other tests' streams, for variety only
  for (DType dtype : kAllDTypes) {
    for (size_t count : kCounts) {
      for (bool in_place : {false, true}) {
        for (int root = 0; root < n_; ++root) {
          SCOPED_TRACE(case_name("broadcast", dtype, ReduceOp::sum, count, in_place) + "/root" + std::to_string(root));
          ++stream;
          const size_t bytes = count * size_of(dtype);
          // Every rank has an input of its own; only the root's may arrive.
          const std::vector<char> input = kInputs.make_input(dtype, ReduceOp::sum, n_, stream, rank_, count);
          const std::vector<char> want = kInputs.make_input(dtype, ReduceOp::sum, n_, stream, root, count);
          std::vector<char> got(bytes + kGuardBytes, kGuardByte);
          if (in_place) {
            if (bytes > 0) std::memcpy(got.data(), input.data(), bytes);
            comm_->broadcast(got.data(), got.data(), count, dtype, root);
          } else {
            comm_->broadcast(input.data(), got.data(), count, dtype, root);
          }
          EXPECT_EQ(differences(dtype, got.data(), want.data(), count), "");
          EXPECT_TRUE(guard_intact(got, bytes)) << "wrote past the output";
        }
      }
    }
  }
}

TEST_F(TreeTest, ReduceToEveryRoot) {
  uint64_t stream = 2000;
  for (DType dtype : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) {
      for (size_t count : kCounts) {
        for (bool in_place : {false, true}) {
          for (int root = 0; root < n_; ++root) {
            SCOPED_TRACE(case_name("reduce", dtype, op, count, in_place) + "/root" + std::to_string(root));
            ++stream;
            const size_t bytes = count * size_of(dtype);
            const std::vector<char> input = kInputs.make_input(dtype, op, n_, stream, rank_, count);
            std::vector<char> got(bytes + kGuardBytes, kGuardByte);
            if (in_place) {
              if (bytes > 0) std::memcpy(got.data(), input.data(), bytes);
              comm_->reduce(got.data(), got.data(), count, dtype, op, root);
            } else {
              const std::vector<char> before = input;
              comm_->reduce(input.data(), got.data(), count, dtype, op, root);
              EXPECT_EQ(input, before) << "out of place must not write the input";
            }
            if (rank_ == root) {
              const std::vector<char> want = kInputs.reference_reduced(dtype, op, n_, stream, 0, count);
              EXPECT_EQ(differences(dtype, got.data(), want.data(), count), "");
            } else if (in_place) {
              // The input is the caller's: a non-root neither reduces into it nor writes the result.
              EXPECT_EQ(differences(dtype, got.data(), input.data(), count), "") << "non-root's buffer changed";
            }
            EXPECT_TRUE(guard_intact(got, bytes)) << "wrote past the output";
          }
        }
      }
    }
  }
}

// kLargeCount elements: every round's message far above Open MPI's eager limit, so sends complete
// only once matched (rendezvous).
TEST_F(TreeTest, LargeBuffersMatchMpi) {
  for (const Case& c : large_cases({DType::f32, DType::i64})) {
    SCOPED_TRACE(std::string(name(c.dtype)) + "/" + std::string(name(c.op)));
    const std::vector<char> input = kInputs.make_input(c.dtype, c.op, n_, c.stream, rank_, c.count);
    const std::vector<char> by_mpi = expect_all_reduce_like(*comm_, *mpi_, input, c);

    const int root = n_ - 1;  // not 0: the tree's positions are shifted
    std::vector<char> got(input.size(), 0);
    comm_->reduce(input.data(), got.data(), c.count, c.dtype, c.op, root);
    if (rank_ == root) {
      EXPECT_EQ(differences(c.dtype, got.data(), by_mpi.data(), c.count), "") << "reduce vs mpi's all_reduce";
    }
    comm_->broadcast(got.data(), got.data(), c.count, c.dtype, root);
    EXPECT_EQ(differences(c.dtype, got.data(), by_mpi.data(), c.count), "") << "broadcast of the reduced buffer";
  }
}

// Random floats, and for min/max random signed zeros: the order of combination now shows
// (min(+0, -0) keeps whichever came first), but both partners of a round put the lower one's data
// first, so every rank must hold the same bits.
TEST_F(TreeTest, AllReduceGivesEveryRankTheSameBits) {
  const size_t count = 1021;  // prime, any count would do
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (ReduceOp op : kAllReduceOps) {
      SCOPED_TRACE(std::string(name(dtype)) + "/" + std::string(name(op)));
      const bool signed_zeros = op == ReduceOp::min || op == ReduceOp::max;
      std::vector<char> data = inexact_input(kInputs, dtype, rank_, count, signed_zeros);
      comm_->all_reduce(data.data(), data.data(), count, dtype, op);
      expect_same_bits_on_every_rank(*mpi_, dtype, data, count);
    }
  }
}

TEST_F(TreeTest, AllReduceAsyncRunsTheTree) {
  const size_t count = 1021;
  const uint64_t stream = 7000;
  std::vector<char> data = kInputs.make_input(DType::i32, ReduceOp::avg, n_, stream, rank_, count);
  auto work = comm_->all_reduce_async(data.data(), data.data(), count, DType::i32, ReduceOp::avg);
  EXPECT_TRUE(work->test()) << "run synchronously: complete on return";
  const std::vector<char> want = kInputs.reference_reduced(DType::i32, ReduceOp::avg, n_, stream, 0, count);
  EXPECT_EQ(differences(DType::i32, data.data(), want.data(), count), "");
}

// An inner communicator that records the point-to-point calls the tree makes and the collectives
// it (must not) delegate.
class CountingCommunicator final : public SpyCommunicator {
 public:
  using SpyCommunicator::SpyCommunicator;
  std::unique_ptr<Work> isend(const void* in, size_t count, DType dtype, int peer) override {
    sends_to.push_back(peer);
    sent_elements += count;
    return inner_->isend(in, count, dtype, peer);
  }
  std::unique_ptr<Work> irecv(void* out, size_t count, DType dtype, int peer) override {
    receives_from.push_back(peer);
    return inner_->irecv(out, count, dtype, peer);
  }
  void all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) override {
    ++delegated;
    inner_->all_reduce(in, out, count, dtype, op);
  }
  void broadcast(const void* in, void* out, size_t count, DType dtype, int root) override {
    ++delegated;
    inner_->broadcast(in, out, count, dtype, root);
  }
  void reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op, int root) override {
    ++delegated;
    inner_->reduce(in, out, count, dtype, op, root);
  }

  void clear() {
    sends_to.clear();
    receives_from.clear();
    sent_elements = 0;
  }
  std::vector<int> sends_to, receives_from;
  size_t sent_elements = 0;
  int delegated = 0;
};

int floor_log2(int n) {
  int k = 0;
  while ((2 << k) <= n) ++k;
  return k;
}

// The rounds and peers of each schedule, exactly: a tree that quietly fell back to a linear or
// flat scheme would give the right data with other messages.
TEST_F(TreeTest, SchedulesUseThePredictedPeers) {
  auto counting = std::make_unique<CountingCommunicator>(make_communicator("mpi", test_options()));
  CountingCommunicator& inner = *counting;
  TreeCommunicator tree(std::move(counting), test_options());
  const size_t count = 100;  // any non-empty count: every message is the whole buffer

  // all_reduce. P = 2^floor(log2 N) survivors, R = N - P extra ranks folded pairwise into 2i+1.
  const int survivors = 1 << floor_log2(n_), extra = n_ - survivors;
  std::vector<int32_t> data(count, 1);
  tree.all_reduce(data.data(), data.data(), count, DType::i32, ReduceOp::sum);
  EXPECT_EQ(data, std::vector<int32_t>(count, n_)) << "all ones: N everywhere";
  std::vector<int> want_sends, want_receives;
  if (rank_ < 2 * extra && rank_ % 2 == 0) {
    want_sends = {rank_ + 1};  // hands its data over ...
    want_receives = {rank_ + 1};  // ... and gets the result back
  } else {
    const int me = rank_ < 2 * extra ? rank_ / 2 : rank_ - extra;
    auto rank_of = [&](int s) { return s < extra ? 2 * s + 1 : s + extra; };
    if (rank_ < 2 * extra) want_receives.push_back(rank_ - 1);
    for (int mask = 1; mask < survivors; mask <<= 1) {
      want_sends.push_back(rank_of(me ^ mask));
      want_receives.push_back(rank_of(me ^ mask));
    }
    if (rank_ < 2 * extra) want_sends.push_back(rank_ - 1);
  }
  EXPECT_EQ(inner.sends_to, want_sends) << "all_reduce";
  EXPECT_EQ(inner.receives_from, want_receives) << "all_reduce";
  EXPECT_EQ(inner.sent_elements, want_sends.size() * count) << "every message is the whole buffer";

  // broadcast and reduce: N-1 messages in all, each rank but the root receiving (broadcast) or
  // sending (reduce) exactly once, over ceil(log2 N) rounds; a position's parent is the position
  // less its lowest set bit.
  for (int root = 0; root < n_; ++root) {
    SCOPED_TRACE("root " + std::to_string(root));
    const int position = (rank_ - root + n_) % n_;
    const int lowest_bit = position & -position;
    const int parent = (position - lowest_bit + root) % n_;
    // The children are position + 2^j for every 2^j below the lowest set bit (the root: below N),
    // the farthest first in broadcast (its subtree is the deepest), the nearest first in reduce.
    int above = lowest_bit;
    if (position == 0) {
      for (above = 1; above < n_; above <<= 1) {
      }
    }
    std::vector<int> children;
    for (int mask = above >> 1; mask > 0; mask >>= 1) {
      if (position + mask < n_) children.push_back((position + mask + root) % n_);
    }
    inner.clear();
    tree.broadcast(data.data(), data.data(), count, DType::i32, root);
    EXPECT_EQ(inner.sends_to, children) << "broadcast";
    EXPECT_EQ(inner.receives_from, position == 0 ? std::vector<int>{} : std::vector<int>{parent}) << "broadcast";

    inner.clear();
    std::vector<int32_t> total(count, 0);
    tree.reduce(data.data(), total.data(), count, DType::i32, ReduceOp::sum, root);
    EXPECT_EQ(inner.sends_to, position == 0 ? std::vector<int>{} : std::vector<int>{parent}) << "reduce";
    EXPECT_EQ(inner.receives_from, std::vector<int>(children.rbegin(), children.rend())) << "reduce";
    if (rank_ == root) {
      EXPECT_EQ(total, std::vector<int32_t>(count, n_ * n_)) << "N ranks of N each";
    }
  }
  EXPECT_EQ(inner.delegated, 0) << "the tree must not hand its collectives to the inner backend";
}

TEST_F(TreeTest, SplitWrapsTheInnerSplit) {
  const int color = rank_ % 2;  // two interleaved halves: non-contiguous world ranks
  auto half = comm_->split(color, rank_);
  ASSERT_NE(half, nullptr);
  expect_interleaved_half(*half, "tree(mpi)", rank_, n_);
  const size_t count = 37;  // odd
  expect_all_reduce_in_place(*half, kInputs, DType::i32, ReduceOp::sum, count, 5000, interleaved_members(color, n_));
}

TEST_F(TreeTest, DelegatesTheOtherOperations) {
  std::vector<int32_t> gathered(static_cast<size_t>(n_), -1);
  comm_->all_gather(&rank_, gathered.data(), 1, DType::i32);
  for (int r = 0; r < n_; ++r) EXPECT_EQ(gathered[static_cast<size_t>(r)], r);
  std::vector<int32_t> ones(static_cast<size_t>(n_), 1);
  int32_t mine = 0;
  comm_->reduce_scatter(ones.data(), &mine, 1, DType::i32, ReduceOp::sum);
  EXPECT_EQ(mine, n_);  // N ones
  std::vector<int32_t> to_each(static_cast<size_t>(n_), rank_), from_each(static_cast<size_t>(n_), -1);
  comm_->all_to_all(to_each.data(), from_each.data(), 1, DType::i32);
  for (int r = 0; r < n_; ++r) EXPECT_EQ(from_each[static_cast<size_t>(r)], r);
  comm_->barrier();
}

// A wait that runs out of time is Error{timeout}, not a hang: the root of a reduce whose child
// never sends. Rank 1 sends afterwards, so the abandoned receive finds its message (into the
// scratch the tree leaked for it) and nothing stays pending.
TEST_F(TreeTest, AWaitPastTheTimeoutThrows) {
  if (n_ < 2) GTEST_SKIP() << "needs a second rank to not arrive";
  constexpr double kShortTimeout = 0.2;  // seconds; far above a real message's microseconds
  CommOptions options = test_options();
  options.timeout_seconds = kShortTimeout;
  TreeCommunicator tree(make_communicator("mpi", test_options()), options);
  auto pair = tree.split(rank_ < 2 ? 0 : 1, rank_);
  int32_t value = 1, total = 0;
  if (rank_ == 0) {
    expect_error(Error::Kind::timeout, "reduce whose child never sends",
                 [&] { pair->reduce(&value, &total, 1, DType::i32, ReduceOp::sum, 0); });
  }
  mpi_->barrier();
  if (rank_ == 1) pair->reduce(&value, &total, 1, DType::i32, ReduceOp::sum, 0);
  mpi_->barrier();
  // The pair's communicator may still hold the leaked request: not freed (as after any error).
  static_cast<void>(pair.release());
}

TEST(TreeErrors, DeviceMemoryIsUnsupported) {
  TreeCommunicator tree(std::make_unique<FakeCommunicator>("fake", Memory::device), CommOptions{});
  EXPECT_EQ(tree.backend(), "tree(fake)");
  float x = 1;
  expect_error(Error::Kind::unsupported, "all_reduce", [&] { tree.all_reduce(&x, &x, 1, DType::f32, ReduceOp::sum); });
  expect_error(Error::Kind::unsupported, "broadcast", [&] { tree.broadcast(&x, &x, 1, DType::f32, 0); });
  expect_error(Error::Kind::unsupported, "reduce", [&] { tree.reduce(&x, &x, 1, DType::f32, ReduceOp::sum, 0); });
}

TEST(TreeErrors, RootOutsideTheGroupIsInvalid) {
  TreeCommunicator tree(std::make_unique<FakeCommunicator>(), CommOptions{});
  float x = 1;
  for (int root : {-1, 1}) {  // a one-rank group has only root 0
    EXPECT_THROW(tree.broadcast(&x, &x, 1, DType::f32, root), Error);
    expect_error(Error::Kind::invalid_argument, "reduce to root " + std::to_string(root),
                 [&] { tree.reduce(&x, &x, 1, DType::f32, ReduceOp::sum, root); });
  }
}

TEST(TreeErrors, NeedsExactlyOneInner) { expect_needs_exactly_one_inner<TreeCommunicator>("tree"); }

}  // namespace
}  // namespace dts

// Tests of the tree(INNER) backend under mpirun (NP 1 2 3 4: powers of two and not, so the fold of
// the extra ranks runs at 3): all_reduce, broadcast and reduce from every root against a reference
// every rank computes, and against mpi, bit for bit; the rounds and peers the schedules promise;
// the same bits on every rank; delegation, split, timeouts and errors.
// Run: ctest -R tree_mpi_test --output-on-failure
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "comm/algorithms/tree.h"
#include "comm/testing/fake_communicator.h"
#include "comm/testing/reference.h"
#include "core/element.h"
#include "core/philox.h"

namespace dts {
namespace {

constexpr testing::Inputs kInputs{0x7EE};  // inputs only need to be reproducible
using testing::case_name;
using testing::differences;
using testing::guard_intact;
using testing::kGuardByte;
using testing::kGuardBytes;
using testing::world_rank;
using testing::world_size;

// Counts swept: 0 and 1 are the edges; 5 and 7 are odd; 64 a power of two; 1021 is prime.
const std::vector<size_t> kCounts{0, 1, 5, 7, 64, 1021};
// Bounds every wait: a schedule bug fails the test instead of hanging until ctest's 600 s.
constexpr double kTestTimeoutSeconds = 60;

CommOptions test_options(double timeout_seconds = kTestTimeoutSeconds) {
  CommOptions options;
  options.timeout_seconds = timeout_seconds;
  return options;
}

class TreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tree_ = make_communicator("tree(mpi)", test_options());
    mpi_ = make_communicator("mpi", test_options());
    n_ = tree_->size();
    rank_ = tree_->rank();
  }
  std::unique_ptr<Communicator> tree_, mpi_;
  int n_ = 1;
  int rank_ = 0;
};

TEST_F(TreeTest, DescribesItselfAndItsInner) {
  EXPECT_EQ(tree_->backend(), "tree(mpi)");
  EXPECT_EQ(tree_->version(), mpi_->version());
  EXPECT_EQ(tree_->rank(), world_rank());
  EXPECT_EQ(tree_->size(), world_size());
  EXPECT_EQ(tree_->memory(), Memory::host);
  bool listed = false;
  for (const auto& info : registered_backends()) {
    listed = listed || (info.name == "tree" && info.usage == "tree(INNER)");
  }
  EXPECT_TRUE(listed);
}

TEST_F(TreeTest, AllReduceMatchesReferenceAndMpi) {
  uint64_t stream = 0;
  for (DType dtype : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) {
      for (size_t count : kCounts) {
        for (bool in_place : {false, true}) {
          SCOPED_TRACE(case_name("all_reduce", dtype, op, count, in_place));
          ++stream;
          const size_t bytes = count * size_of(dtype);
          const std::vector<char> input = kInputs.make_input(dtype, op, n_, stream, rank_, count);
          const std::vector<char> want = kInputs.reference_reduced(dtype, op, n_, stream, 0, count);
          std::vector<char> got(bytes + kGuardBytes, kGuardByte);
          if (in_place) {
            if (bytes > 0) std::memcpy(got.data(), input.data(), bytes);
            tree_->all_reduce(got.data(), got.data(), count, dtype, op);
          } else {
            const std::vector<char> before = input;
            tree_->all_reduce(input.data(), got.data(), count, dtype, op);
            EXPECT_EQ(input, before) << "out of place must not write the input";
          }
          std::vector<char> by_mpi(bytes);
          mpi_->all_reduce(input.data(), by_mpi.data(), count, dtype, op);
          EXPECT_EQ(differences(dtype, got.data(), want.data(), count), "") << "vs reference";
          EXPECT_EQ(differences(dtype, got.data(), by_mpi.data(), count), "") << "vs mpi";
          EXPECT_TRUE(guard_intact(got, bytes)) << "wrote past the output";
        }
      }
    }
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
            tree_->broadcast(got.data(), got.data(), count, dtype, root);
          } else {
            tree_->broadcast(input.data(), got.data(), count, dtype, root);
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
              tree_->reduce(got.data(), got.data(), count, dtype, op, root);
            } else {
              const std::vector<char> before = input;
              tree_->reduce(input.data(), got.data(), count, dtype, op, root);
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

// 2^20 + 3 elements (4 MiB of f32, not divisible by 2, 3 or 4): every round's message far above
// Open MPI's eager limit, so sends complete only once matched (rendezvous).
TEST_F(TreeTest, LargeBuffersMatchMpi) {
  const size_t count = (size_t{1} << 20) + 3;
  for (DType dtype : {DType::f32, DType::i64}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
      SCOPED_TRACE(std::string(name(dtype)) + "/" + std::string(name(op)));
      const uint64_t stream = 6000 + static_cast<uint64_t>(op);
      const std::vector<char> input = kInputs.make_input(dtype, op, n_, stream, rank_, count);
      std::vector<char> got(input.size()), by_mpi(input.size());
      tree_->all_reduce(input.data(), got.data(), count, dtype, op);
      mpi_->all_reduce(input.data(), by_mpi.data(), count, dtype, op);
      EXPECT_EQ(differences(dtype, got.data(), by_mpi.data(), count), "") << "all_reduce vs mpi";

      const int root = n_ - 1;  // not 0: the tree's positions are shifted
      std::fill(got.begin(), got.end(), 0);
      tree_->reduce(input.data(), got.data(), count, dtype, op, root);
      if (rank_ == root) {
        EXPECT_EQ(differences(dtype, got.data(), by_mpi.data(), count), "") << "reduce vs mpi's all_reduce";
      }
      tree_->broadcast(got.data(), got.data(), count, dtype, root);
      EXPECT_EQ(differences(dtype, got.data(), by_mpi.data(), count), "") << "broadcast of the reduced buffer";
    }
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
      const size_t width = size_of(dtype);
      std::vector<char> data(count * width);
      for (size_t i = 0; i < count; ++i) {
        const double u = philox_uniform(kInputs.seed, 3000 + static_cast<uint64_t>(rank_), i);
        store_double(dtype, data.data(), i, signed_zeros ? (u < 0.5 ? 0.0 : -0.0) : 0.5 + u);
      }
      tree_->all_reduce(data.data(), data.data(), count, dtype, op);
      std::vector<char> everyone(count * width * static_cast<size_t>(n_));
      mpi_->all_gather(data.data(), everyone.data(), count, dtype);
      for (int r = 0; r < n_; ++r) {
        EXPECT_EQ(std::memcmp(everyone.data() + static_cast<size_t>(r) * count * width, data.data(), count * width), 0)
            << "rank " << r << " holds other bits";
      }
    }
  }
}

TEST_F(TreeTest, AllReduceAsyncRunsTheTree) {
  const size_t count = 1021;
  const uint64_t stream = 7000;
  std::vector<char> data = kInputs.make_input(DType::i32, ReduceOp::avg, n_, stream, rank_, count);
  auto work = tree_->all_reduce_async(data.data(), data.data(), count, DType::i32, ReduceOp::avg);
  EXPECT_TRUE(work->test()) << "run synchronously: complete on return";
  const std::vector<char> want = kInputs.reference_reduced(DType::i32, ReduceOp::avg, n_, stream, 0, count);
  EXPECT_EQ(differences(DType::i32, data.data(), want.data(), count), "");
}

// An inner communicator that records the point-to-point calls the tree makes and the collectives
// it (must not) delegate.
class CountingCommunicator final : public Communicator {
 public:
  explicit CountingCommunicator(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)) {}
  std::string_view backend() const override { return inner_->backend(); }
  std::string version() const override { return inner_->version(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Memory memory() const override { return inner_->memory(); }
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
  void barrier() override { inner_->barrier(); }
  std::unique_ptr<Communicator> split(int color, int key) override { return inner_->split(color, key); }

  void clear() {
    sends_to.clear();
    receives_from.clear();
    sent_elements = 0;
  }
  std::vector<int> sends_to, receives_from;
  size_t sent_elements = 0;
  int delegated = 0;

 private:
  std::unique_ptr<Communicator> inner_;
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
  auto half = tree_->split(color, rank_);
  ASSERT_NE(half, nullptr);
  EXPECT_EQ(half->backend(), "tree(mpi)");
  EXPECT_EQ(half->size(), (n_ + 1 - color) / 2);  // evens: ceil(N/2), odds: floor(N/2)
  EXPECT_EQ(half->rank(), rank_ / 2);
  std::vector<int> members;
  for (int r = color; r < n_; r += 2) members.push_back(r);
  const size_t count = 37;  // odd
  const uint64_t stream = 5000;
  std::vector<char> data = kInputs.make_input(DType::i32, ReduceOp::sum, n_, stream, rank_, count);
  half->all_reduce(data.data(), data.data(), count, DType::i32, ReduceOp::sum);
  const std::vector<char> want = kInputs.reference_reduced(DType::i32, ReduceOp::sum, n_, stream, 0, count, members);
  EXPECT_EQ(differences(DType::i32, data.data(), want.data(), count), "");
}

TEST_F(TreeTest, DelegatesTheOtherOperations) {
  std::vector<int32_t> gathered(static_cast<size_t>(n_), -1);
  tree_->all_gather(&rank_, gathered.data(), 1, DType::i32);
  for (int r = 0; r < n_; ++r) EXPECT_EQ(gathered[static_cast<size_t>(r)], r);
  std::vector<int32_t> ones(static_cast<size_t>(n_), 1);
  int32_t mine = 0;
  tree_->reduce_scatter(ones.data(), &mine, 1, DType::i32, ReduceOp::sum);
  EXPECT_EQ(mine, n_);  // N ones
  std::vector<int32_t> to_each(static_cast<size_t>(n_), rank_), from_each(static_cast<size_t>(n_), -1);
  tree_->all_to_all(to_each.data(), from_each.data(), 1, DType::i32);
  for (int r = 0; r < n_; ++r) EXPECT_EQ(from_each[static_cast<size_t>(r)], r);
  tree_->barrier();
}

// A wait that runs out of time is Error{timeout}, not a hang: the root of a reduce whose child
// never sends. Rank 1 sends afterwards, so the abandoned receive finds its message (into the
// scratch the tree leaked for it) and nothing stays pending.
TEST_F(TreeTest, AWaitPastTheTimeoutThrows) {
  if (n_ < 2) GTEST_SKIP() << "needs a second rank to not arrive";
  constexpr double kShortTimeout = 0.2;  // seconds; far above a real message's microseconds
  TreeCommunicator tree(make_communicator("mpi", test_options()), test_options(kShortTimeout));
  auto pair = tree.split(rank_ < 2 ? 0 : 1, rank_);
  int32_t value = 1, total = 0;
  if (rank_ == 0) {
    try {
      pair->reduce(&value, &total, 1, DType::i32, ReduceOp::sum, 0);
      ADD_FAILURE() << "expected Error{timeout}";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::timeout) << e.what();
    }
  }
  mpi_->barrier();
  if (rank_ == 1) pair->reduce(&value, &total, 1, DType::i32, ReduceOp::sum, 0);
  mpi_->barrier();
  // The pair's communicator may still hold the leaked request: not freed (as after any error).
  static_cast<void>(pair.release());
}

TEST(TreeErrors, DeviceMemoryIsUnsupported) {
  TreeCommunicator tree(std::make_unique<testing::FakeCommunicator>("fake", Memory::device), CommOptions{});
  EXPECT_EQ(tree.backend(), "tree(fake)");
  float x = 1;
  for (auto call : {+[](Communicator& c, float* p) { c.all_reduce(p, p, 1, DType::f32, ReduceOp::sum); },
                    +[](Communicator& c, float* p) { c.broadcast(p, p, 1, DType::f32, 0); },
                    +[](Communicator& c, float* p) { c.reduce(p, p, 1, DType::f32, ReduceOp::sum, 0); }}) {
    try {
      call(tree, &x);
      ADD_FAILURE() << "expected Error{unsupported}";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::unsupported) << e.what();
    }
  }
}

TEST(TreeErrors, RootOutsideTheGroupIsInvalid) {
  TreeCommunicator tree(std::make_unique<testing::FakeCommunicator>(), CommOptions{});
  float x = 1;
  for (int root : {-1, 1}) {  // a one-rank group has only root 0
    EXPECT_THROW(tree.broadcast(&x, &x, 1, DType::f32, root), Error);
    try {
      tree.reduce(&x, &x, 1, DType::f32, ReduceOp::sum, root);
      ADD_FAILURE() << "expected Error{invalid_argument}";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::invalid_argument) << e.what();
    }
  }
}

TEST(TreeErrors, NeedsExactlyOneInner) {
  for (const char* spec : {"tree", "tree(mpi,mpi)"}) {
    try {
      make_communicator(spec);
      ADD_FAILURE() << spec << ": expected Error{invalid_argument}";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::invalid_argument) << spec << ": " << e.what();
    }
  }
  EXPECT_THROW(TreeCommunicator(nullptr, CommOptions{}), Error);
}

}  // namespace
}  // namespace dts

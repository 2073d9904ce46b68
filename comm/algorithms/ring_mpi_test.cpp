// Tests of the ring(INNER) backend under mpirun (NP 1 2 3 4): all_reduce, reduce_scatter and
// all_gather against a reference every rank computes from every rank's inputs, and against the
// mpi backend, bit for bit; the chunk count the pipeline really uses; delegation and errors.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <string>
#include <vector>

#include "comm/algorithms/ring.h"
#include "comm/testing/reference.h"
#include "core/element.h"
#include "core/philox.h"
#include "core/reduce.h"

namespace dts {
namespace {

constexpr testing::Inputs kInputs{0x5EED};  // inputs only need to be reproducible
using testing::case_name;
using testing::differences;
using testing::guard_intact;
using testing::kGuardByte;
using testing::kGuardBytes;
using testing::world_rank;
using testing::world_size;

// Counts swept: 0 and 1 are the edges; 2 and 3 are smaller than N at NP 4 (empty segments);
// 5 and 7 are odd and divisible by no N in 2..4; 64 is divisible by 2 and 4 but not 3; 1031 is
// prime and spans many 64-byte chunks per segment (f64: 8 per chunk, 258/8 -> 33, the last short).
const std::vector<size_t> kCounts{0, 1, 2, 3, 5, 7, 17, 64, 1031};

// Small chunks so that even short buffers go through many chunks of the pipeline.
constexpr size_t kTestChunkBytes = 64;
// Bounds every wait: a schedule bug fails the test instead of hanging until ctest's 600 s.
constexpr double kTestTimeoutSeconds = 60;

CommOptions test_options(size_t chunk_bytes = kTestChunkBytes) {
  CommOptions options;
  options.chunk_bytes = chunk_bytes;
  options.timeout_seconds = kTestTimeoutSeconds;
  return options;
}


class RingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ring_ = make_communicator("ring(mpi)", test_options());
    mpi_ = make_communicator("mpi", test_options());
    n_ = ring_->size();
    rank_ = ring_->rank();
  }
  std::unique_ptr<Communicator> ring_, mpi_;
  int n_ = 1;
  int rank_ = 0;
};

TEST_F(RingTest, DescribesItselfAndItsInner) {
  EXPECT_EQ(ring_->backend(), "ring(mpi)");
  EXPECT_EQ(ring_->version(), mpi_->version());
  EXPECT_EQ(ring_->rank(), world_rank());
  EXPECT_EQ(ring_->size(), world_size());
  EXPECT_EQ(ring_->memory(), Memory::host);
  bool listed = false;
  for (const auto& info : registered_backends())
    listed = listed || (info.name == "ring" && info.usage == "ring(INNER)");
  EXPECT_TRUE(listed);
}

TEST_F(RingTest, AllReduceMatchesReferenceAndMpi) {
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
            std::memcpy(got.data(), input.data(), bytes);
            ring_->all_reduce(got.data(), got.data(), count, dtype, op);
          } else {
            const std::vector<char> before = input;
            ring_->all_reduce(input.data(), got.data(), count, dtype, op);
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

TEST_F(RingTest, ReduceScatterMatchesReferenceAndMpi) {
  uint64_t stream = 1000;  // apart from the other tests' streams, for variety only
  for (DType dtype : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) {
      for (size_t out_count : kCounts) {
        for (bool in_place : {false, true}) {
          SCOPED_TRACE(case_name("reduce_scatter", dtype, op, out_count, in_place));
          ++stream;
          const size_t width = size_of(dtype);
          const size_t total = out_count * static_cast<size_t>(n_);
          const size_t own = static_cast<size_t>(rank_) * out_count;
          const std::vector<char> input = kInputs.make_input(dtype, op, n_, stream, rank_, total);
          const std::vector<char> want = kInputs.reference_reduced(dtype, op, n_, stream, own, out_count);

          std::vector<char> got;
          const char* result = nullptr;
          std::vector<char> buffer;
          if (in_place) {
            buffer = input;
            buffer.resize(buffer.size() + kGuardBytes, kGuardByte);
            ring_->reduce_scatter(buffer.data(), buffer.data() + own * width, out_count, dtype, op);
            result = buffer.data() + own * width;
            EXPECT_TRUE(guard_intact(buffer, total * width)) << "wrote past the buffer";
          } else {
            const std::vector<char> before = input;
            got.assign(out_count * width + kGuardBytes, kGuardByte);
            ring_->reduce_scatter(input.data(), got.data(), out_count, dtype, op);
            result = got.data();
            EXPECT_EQ(input, before) << "out of place must not write the input";
            EXPECT_TRUE(guard_intact(got, out_count * width)) << "wrote past the output";
          }
          std::vector<char> by_mpi(out_count * width);
          mpi_->reduce_scatter(input.data(), by_mpi.data(), out_count, dtype, op);

          EXPECT_EQ(differences(dtype, result, want.data(), out_count), "") << "vs reference";
          EXPECT_EQ(differences(dtype, result, by_mpi.data(), out_count), "") << "vs mpi";
        }
      }
    }
  }
}

TEST_F(RingTest, AllGatherMatchesReferenceAndMpi) {
  uint64_t stream = 2000;
  for (DType dtype : kAllDTypes) {
    for (size_t in_count : kCounts) {
      for (bool in_place : {false, true}) {
        SCOPED_TRACE(case_name("all_gather", dtype, ReduceOp::sum, in_count, in_place));
        ++stream;
        const size_t width = size_of(dtype);
        const size_t total = in_count * static_cast<size_t>(n_);
        const std::vector<char> input = kInputs.make_input(dtype, ReduceOp::sum, n_, stream, rank_, in_count);
        const std::vector<char> want = kInputs.reference_gathered(dtype, ReduceOp::sum, n_, stream, in_count);

        std::vector<char> got(total * width + kGuardBytes, kGuardByte);
        if (in_place) {
          char* own = got.data() + static_cast<size_t>(rank_) * in_count * width;
          if (in_count > 0) std::memcpy(own, input.data(), input.size());
          ring_->all_gather(own, got.data(), in_count, dtype);
        } else {
          ring_->all_gather(input.data(), got.data(), in_count, dtype);
        }
        std::vector<char> by_mpi(total * width);
        mpi_->all_gather(input.data(), by_mpi.data(), in_count, dtype);

        EXPECT_EQ(differences(dtype, got.data(), want.data(), total), "") << "vs reference";
        EXPECT_EQ(differences(dtype, got.data(), by_mpi.data(), total), "") << "vs mpi";
        EXPECT_TRUE(guard_intact(got, total * width)) << "wrote past the output";
      }
    }
  }
}

// Inputs that are not exact (random floats): the order of summation now matters, but the
// all-gather phase hands out one reduced copy, so every rank must still hold the same bits.
TEST_F(RingTest, AllReduceGivesEveryRankTheSameBits) {
  const size_t count = 1031;  // prime: uneven segments, many chunks
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::prod}) {
      SCOPED_TRACE(std::string(name(dtype)) + "/" + std::string(name(op)));
      const size_t width = size_of(dtype);
      std::vector<char> data(count * width);
      for (size_t i = 0; i < count; ++i) {
        const double u = philox_uniform(kInputs.seed, 3000 + static_cast<uint64_t>(rank_), i);
        store_double(dtype, data.data(), i, 0.5 + u);
      }
      ring_->all_reduce(data.data(), data.data(), count, dtype, op);
      std::vector<char> everyone(count * width * static_cast<size_t>(n_));
      mpi_->all_gather(data.data(), everyone.data(), count, dtype);
      for (int r = 0; r < n_; ++r) {
        EXPECT_EQ(differences(dtype, everyone.data() + static_cast<size_t>(r) * count * width, data.data(), count), "")
            << "rank " << r << " holds other bits";
      }
    }
  }
}

// Chunk sizes below one element (0, 1 byte) still move one element per chunk; the default
// (128 KiB) moves each segment whole. Both must give the reference.
TEST_F(RingTest, ChunkSizeEdgesGiveTheReference) {
  for (size_t chunk_bytes : {size_t{0}, size_t{1}, size_t{3}, CommOptions{}.chunk_bytes}) {
    auto ring = make_communicator("ring(mpi)", test_options(chunk_bytes));
    for (DType dtype : {DType::f32, DType::i8, DType::bf16}) {
      for (size_t count : {size_t{7}, size_t{64}}) {
        SCOPED_TRACE("chunk_bytes=" + std::to_string(chunk_bytes) + "/" + std::string(name(dtype)) + "/" +
                     std::to_string(count));
        const uint64_t stream = 4000 + count;
        std::vector<char> data = kInputs.make_input(dtype, ReduceOp::sum, n_, stream, rank_, count);
        const std::vector<char> want = kInputs.reference_reduced(dtype, ReduceOp::sum, n_, stream, 0, count);
        ring->all_reduce(data.data(), data.data(), count, dtype, ReduceOp::sum);
        EXPECT_EQ(differences(dtype, data.data(), want.data(), count), "");
      }
    }
  }
}

// The default 128 KiB chunks are far above Open MPI's eager limit (4 KiB over shared memory), so
// every send completes only once matched (rendezvous): the path where buffer reuse and the
// order of posting matter. 2^20 + 3 f32 (4 MiB, not divisible by 2, 3 or 4) gives each rank a
// segment of about 1 MiB / N, i.e. several full chunks and a short one per step.
TEST_F(RingTest, LargeBuffersWithDefaultChunks) {
  auto ring = make_communicator("ring(mpi)", test_options(CommOptions{}.chunk_bytes));
  const size_t count = (size_t{1} << 20) + 3;
  for (DType dtype : {DType::f32, DType::i64}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
      SCOPED_TRACE(std::string(name(dtype)) + "/" + std::string(name(op)));
      const uint64_t stream = 6000 + static_cast<uint64_t>(op);
      const std::vector<char> input = kInputs.make_input(dtype, op, n_, stream, rank_, count);
      std::vector<char> got(input.size()), by_mpi(input.size());
      ring->all_reduce(input.data(), got.data(), count, dtype, op);
      mpi_->all_reduce(input.data(), by_mpi.data(), count, dtype, op);
      EXPECT_EQ(differences(dtype, got.data(), by_mpi.data(), count), "") << "all_reduce vs mpi";

      const size_t block = count / static_cast<size_t>(n_);
      std::vector<char> scattered(block * size_of(dtype)), scattered_by_mpi(scattered.size());
      ring->reduce_scatter(input.data(), scattered.data(), block, dtype, op);
      mpi_->reduce_scatter(input.data(), scattered_by_mpi.data(), block, dtype, op);
      EXPECT_EQ(differences(dtype, scattered.data(), scattered_by_mpi.data(), block), "") << "reduce_scatter vs mpi";

      std::vector<char> gathered(block * size_of(dtype) * static_cast<size_t>(n_)), gathered_by_mpi(gathered.size());
      ring->all_gather(input.data(), gathered.data(), block, dtype);
      mpi_->all_gather(input.data(), gathered_by_mpi.data(), block, dtype);
      EXPECT_EQ(differences(dtype, gathered.data(), gathered_by_mpi.data(), block * static_cast<size_t>(n_)), "")
          << "all_gather vs mpi";
    }
  }
}

// An inner communicator that counts the point-to-point calls the ring makes and the
// collectives it (must not) delegate.
class CountingCommunicator final : public Communicator {
 public:
  explicit CountingCommunicator(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)) {}
  std::string_view backend() const override { return inner_->backend(); }
  std::string version() const override { return inner_->version(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Memory memory() const override { return inner_->memory(); }
  std::unique_ptr<Work> isend(const void* in, size_t count, DType dtype, int peer) override {
    ++isends;
    if (peer != (rank() + 1) % size()) ++wrong_peer;
    return inner_->isend(in, count, dtype, peer);
  }
  std::unique_ptr<Work> irecv(void* out, size_t count, DType dtype, int peer) override {
    ++irecvs;
    if (peer != (rank() - 1 + size()) % size()) ++wrong_peer;
    return inner_->irecv(out, count, dtype, peer);
  }
  void all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) override {
    ++delegated;
    inner_->all_reduce(in, out, count, dtype, op);
  }
  void reduce_scatter(const void* in, void* out, size_t out_count, DType dtype, ReduceOp op) override {
    ++delegated;
    inner_->reduce_scatter(in, out, out_count, dtype, op);
  }
  void all_gather(const void* in, void* out, size_t in_count, DType dtype) override {
    ++delegated;
    inner_->all_gather(in, out, in_count, dtype);
  }
  void barrier() override { inner_->barrier(); }
  std::unique_ptr<Communicator> split(int color, int key) override { return inner_->split(color, key); }

  int isends = 0, irecvs = 0, wrong_peer = 0, delegated = 0;

 private:
  std::unique_ptr<Communicator> inner_;
};

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

// The pipeline really runs in chunks, and exactly as many as the schedule says. all_reduce
// splits C elements into segments of L_s = C/N (+1 for s < C%N); every step sends one segment
// in ceil(L_s/c) non-empty chunks. Over the 2(N-1) steps rank r sends every segment twice
// except segment r (only in the gather phase) and segment r+1 (only in the reduce phase), and
// receives every segment twice except r-1 and r.
TEST_F(RingTest, PipelineSendsThePredictedNumberOfChunks) {
  constexpr size_t kChunkBytes = 64;  // 16 f32 per chunk
  constexpr size_t kChunkElements = kChunkBytes / 4;
  auto counting = std::make_unique<CountingCommunicator>(make_communicator("mpi", test_options()));
  CountingCommunicator& inner = *counting;
  RingCommunicator ring(std::move(counting), test_options(kChunkBytes));
  EXPECT_EQ(ring.backend(), "ring(mpi)");
  EXPECT_EQ(ring.chunk_elements(DType::f32), kChunkElements);
  EXPECT_EQ(ring.chunk_elements(DType::f64), kChunkBytes / 8);

  const auto n = static_cast<size_t>(n_);
  const auto r = static_cast<size_t>(rank_);
  for (size_t count : {size_t{1000}, size_t{1031}, size_t{3}}) {  // divisible by 2 and 4; prime; < N at NP 4
    SCOPED_TRACE("all_reduce/f32/sum/" + std::to_string(count));
    auto chunks_of = [&](size_t segment) {
      return ceil_div(count / n + (segment < count % n ? 1 : 0), kChunkElements);
    };
    size_t all_segments = 0;
    for (size_t s = 0; s < n; ++s) all_segments += chunks_of(s);
    const size_t want_isends = n == 1 ? 0 : 2 * all_segments - chunks_of(r) - chunks_of((r + 1) % n);
    const size_t want_irecvs = n == 1 ? 0 : 2 * all_segments - chunks_of((r + n - 1) % n) - chunks_of(r);

    std::vector<float> data(count, 1.0f);
    inner.isends = inner.irecvs = 0;
    ring.all_reduce(data.data(), data.data(), count, DType::f32, ReduceOp::sum);
    EXPECT_EQ(static_cast<size_t>(inner.isends), want_isends);
    EXPECT_EQ(static_cast<size_t>(inner.irecvs), want_irecvs);
    // All ones: the sum is N everywhere.
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(data[i], static_cast<float>(n)) << i;
    if (n > 1 && count >= 1000) {
      // More than one chunk per step: the pipeline is exercised, not one send per segment.
      EXPECT_GT(static_cast<size_t>(inner.isends), 2 * (n - 1));
    }
    if (rank_ == 0) {
      std::printf("[ring] N=%zu all_reduce of %zu f32 in %zu-element chunks: rank 0 made %d isends, %d irecvs\n", n,
                  count, kChunkElements, inner.isends, inner.irecvs);
    }
  }

  // reduce_scatter and all_gather: N-1 steps, each moving one block of m in ceil(m/c) chunks.
  const size_t block = 100;  // 100/16 -> 7 chunks, the last of 4 elements
  const size_t want = (n - 1) * ceil_div(block, kChunkElements);
  std::vector<float> input(block * n, 1.0f), output(block * n);
  inner.isends = inner.irecvs = 0;
  ring.reduce_scatter(input.data(), output.data(), block, DType::f32, ReduceOp::sum);
  EXPECT_EQ(static_cast<size_t>(inner.isends), want);
  EXPECT_EQ(static_cast<size_t>(inner.irecvs), want);
  inner.isends = inner.irecvs = 0;
  ring.all_gather(input.data(), output.data(), block, DType::f32);
  EXPECT_EQ(static_cast<size_t>(inner.isends), want);
  EXPECT_EQ(static_cast<size_t>(inner.irecvs), want);

  EXPECT_EQ(inner.delegated, 0) << "the ring must not hand its collectives to the inner backend";
  EXPECT_EQ(inner.wrong_peer, 0) << "a ring talks only to rank+1 and rank-1";
}

TEST_F(RingTest, SplitWrapsTheInnerSplit) {
  const int color = rank_ % 2;  // two interleaved halves: non-contiguous world ranks
  auto half = ring_->split(color, rank_);
  EXPECT_EQ(half->backend(), "ring(mpi)");
  EXPECT_EQ(half->size(), (n_ + 1 - color) / 2);  // evens: ceil(N/2), odds: floor(N/2)
  EXPECT_EQ(half->rank(), rank_ / 2);
  const size_t count = 37;  // odd, several 64-byte chunks of i32
  const uint64_t stream = 5000;
  std::vector<char> data = kInputs.make_input(DType::i32, ReduceOp::sum, n_, stream, rank_, count);
  half->all_reduce(data.data(), data.data(), count, DType::i32, ReduceOp::sum);
  std::vector<int32_t> want(count, 0);
  for (int r = color; r < n_; r += 2) {
    for (size_t i = 0; i < count; ++i)
      want[i] += static_cast<int32_t>(kInputs.input_value(DType::i32, ReduceOp::sum, n_, stream, r, i));
  }
  EXPECT_EQ(std::memcmp(data.data(), want.data(), data.size()), 0);
}

TEST_F(RingTest, DelegatesTheOtherOperations) {
  const size_t count = 9;  // any small odd count
  std::vector<int32_t> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = rank_ == 0 ? static_cast<int32_t>(i) : -1;
  ring_->broadcast(data.data(), data.data(), count, DType::i32, 0);
  for (size_t i = 0; i < count; ++i) EXPECT_EQ(data[i], static_cast<int32_t>(i));

  std::vector<int32_t> mine(count, rank_), from_prev(count, -1);
  ring_->send_recv(mine.data(), (rank_ + 1) % n_, from_prev.data(), (rank_ - 1 + n_) % n_, count, DType::i32);
  EXPECT_EQ(from_prev, std::vector<int32_t>(count, (rank_ - 1 + n_) % n_));

  int32_t total = 0;
  ring_->reduce(&rank_, &total, 1, DType::i32, ReduceOp::sum, 0);
  if (rank_ == 0) {
    EXPECT_EQ(total, n_ * (n_ - 1) / 2);  // 0 + 1 + ... + N-1
  }

  std::vector<int32_t> to_each(static_cast<size_t>(n_), rank_), from_each(static_cast<size_t>(n_), -1);
  ring_->all_to_all(to_each.data(), from_each.data(), 1, DType::i32);
  for (int r = 0; r < n_; ++r) EXPECT_EQ(from_each[static_cast<size_t>(r)], r);
  ring_->barrier();
}

// A one-rank inner whose buffers live on a device: the ring reduces on the host, so it refuses.
class DeviceMemoryStub final : public Communicator {
 public:
  std::string_view backend() const override { return "stub"; }
  std::string version() const override { return "0"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Memory memory() const override { return Memory::device; }
  void barrier() override {}
  std::unique_ptr<Communicator> split(int, int) override { unsupported("split"); }
};

TEST(RingErrors, DeviceMemoryIsUnsupported) {
  RingCommunicator ring(std::make_unique<DeviceMemoryStub>(), CommOptions{});
  EXPECT_EQ(ring.backend(), "ring(stub)");
  float x = 1;
  for (auto call : {+[](Communicator&c, float*p) { c.all_reduce(p, p, 1, DType::f32, ReduceOp::sum); },
                    +[](Communicator&c, float*p) { c.reduce_scatter(p, p, 1, DType::f32, ReduceOp::sum); },
                    +[](Communicator&c, float*p) { c.all_gather(p, p, 1, DType::f32); }}) {
    try {
      call(ring, &x);
      ADD_FAILURE() << "expected Error{unsupported}";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::unsupported) << e.what();
    }
  }
}

TEST(RingErrors, NeedsExactlyOneInner) {
  for (const char* spec : {"ring", "ring(mpi,mpi)"}) {
    try {
      make_communicator(spec);
      ADD_FAILURE() << spec << ": expected Error{invalid_argument}";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::invalid_argument) << spec << ": " << e.what();
    }
  }
  EXPECT_THROW(RingCommunicator(nullptr, CommOptions{}), Error);
}

}  // namespace
}  // namespace dts

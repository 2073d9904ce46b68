// Tests of the ring(INNER) backend under mpirun (NP 1 2 3 4): all_reduce, reduce_scatter and
// all_gather against a reference every rank computes from every rank's inputs, and against the
// mpi backend, bit for bit; the chunk count the pipeline really uses; delegation and errors.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "comm/algorithms/ring.h"
#include "comm/testing/collective_testing.h"

namespace dts {
namespace {

using namespace ::dts::testing;  // the shared test pieces: inputs, references, checks, fixture
constexpr Inputs kInputs{0x5EED};  // inputs only need to be reproducible

// Counts swept: 0 and 1 are the edges; 2 and 3 are smaller than N at NP 4 (empty segments);
// 5 and 7 are odd and divisible by no N in 2..4; 64 is divisible by 2 and 4 but not 3; 1031 is
// prime and spans many 64-byte chunks per segment (f64: 8 per chunk, 258/8 -> 33, the last short).
const std::vector<size_t> kCounts{0, 1, 2, 3, 5, 7, 17, 64, 1031};

// Small chunks so that even short buffers go through many chunks of the pipeline.
constexpr size_t kTestChunkBytes = 64;

class RingTest : public AlgorithmTest {
 protected:
  RingTest() : AlgorithmTest("ring(mpi)", test_options(kTestChunkBytes)) {}
};

TEST_F(RingTest, DescribesItselfAndItsInner) {
  EXPECT_EQ(comm_->backend(), "ring(mpi)");
  expect_describes_wrapper(*comm_, *mpi_, "ring");
}

TEST_F(RingTest, AllReduceMatchesReferenceAndMpi) {
  for (const Case& c : reduction_cases(kCounts, 0)) {
    SCOPED_TRACE(case_name("all_reduce", c));
    expect_all_reduce_matches(*comm_, kInputs, c, mpi_.get());
  }
}

// reduce_scatter of case `c` on `ring`: the reference and mpi's bits; out of place the input
// untouched; nothing written past the output (or, in place, past the buffer).
void expect_reduce_scatter_matches(Communicator& ring, Communicator& mpi, const Case& c) {
  const int n = ring.size();
  const int rank = ring.rank();
  const size_t out_count = c.count;
  const size_t width = size_of(c.dtype);
  const size_t total = out_count * static_cast<size_t>(n);
  const size_t own = static_cast<size_t>(rank) * out_count;
  const std::vector<char> input = kInputs.make_input(c.dtype, c.op, n, c.stream, rank, total);
  const std::vector<char> want = kInputs.reference_reduced(c.dtype, c.op, n, c.stream, own, out_count);

  std::vector<char> got;
  const char* result = nullptr;
  std::vector<char> buffer;
  if (c.in_place) {
    buffer = input;
    buffer.resize(buffer.size() + kGuardBytes, kGuardByte);
    ring.reduce_scatter(buffer.data(), buffer.data() + own * width, out_count, c.dtype, c.op);
    result = buffer.data() + own * width;
    EXPECT_TRUE(guard_intact(buffer, total * width)) << "wrote past the buffer";
  } else {
    const std::vector<char> before = input;
    got.assign(out_count * width + kGuardBytes, kGuardByte);
    ring.reduce_scatter(input.data(), got.data(), out_count, c.dtype, c.op);
    result = got.data();
    EXPECT_EQ(input, before) << "out of place must not write the input";
    EXPECT_TRUE(guard_intact(got, out_count * width)) << "wrote past the output";
  }
  std::vector<char> by_mpi(out_count * width);
  mpi.reduce_scatter(input.data(), by_mpi.data(), out_count, c.dtype, c.op);

  EXPECT_EQ(differences(c.dtype, result, want.data(), out_count), "") << "vs reference";
  EXPECT_EQ(differences(c.dtype, result, by_mpi.data(), out_count), "") << "vs mpi";
}

// all_gather of case `c` on `ring`: the reference and mpi's bits; nothing written past the output.
void expect_all_gather_matches(Communicator& ring, Communicator& mpi, const Case& c) {
  const int n = ring.size();
  const std::vector<char> input = kInputs.make_input(c.dtype, c.op, n, c.stream, ring.rank(), c.count);
  const std::vector<char> want = kInputs.reference_gathered(c.dtype, c.op, n, c.stream, c.count);
  const size_t total = c.count * static_cast<size_t>(n);  // elements, every rank's block

  std::vector<char> got(want.size() + kGuardBytes, kGuardByte);
  all_gather_into(ring, input, c, got);
  std::vector<char> by_mpi(want.size());
  mpi.all_gather(input.data(), by_mpi.data(), c.count, c.dtype);

  EXPECT_EQ(differences(c.dtype, got.data(), want.data(), total), "") << "vs reference";
  EXPECT_EQ(differences(c.dtype, got.data(), by_mpi.data(), total), "") << "vs mpi";
  EXPECT_TRUE(guard_intact(got, want.size())) << "wrote past the output";
}

TEST_F(RingTest, ReduceScatterMatchesReferenceAndMpi) {
  // Streams from 1000: apart from the other tests' streams, for variety only.
  for (const Case& c : reduction_cases(kCounts, 1000)) {
    SCOPED_TRACE(case_name("reduce_scatter", c));
    expect_reduce_scatter_matches(*comm_, *mpi_, c);
  }
}

TEST_F(RingTest, AllGatherMatchesReferenceAndMpi) {
  for (const Case& c : data_cases(kCounts, 2000)) {
    SCOPED_TRACE(case_name("all_gather", c));
    expect_all_gather_matches(*comm_, *mpi_, c);
  }
}

// Inputs that are not exact (random floats): the order of summation now matters, but the
// all-gather phase hands out one reduced copy, so every rank must still hold the same bits.
TEST_F(RingTest, AllReduceGivesEveryRankTheSameBits) {
  const size_t count = 1031;  // prime: uneven segments, many chunks
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::prod}) {
      SCOPED_TRACE(std::string(name(dtype)) + "/" + std::string(name(op)));
      std::vector<char> data = inexact_input(kInputs, dtype, rank_, count);
      comm_->all_reduce(data.data(), data.data(), count, dtype, op);
      expect_same_bits_on_every_rank(*mpi_, dtype, data, count);
    }
  }
}

// Chunk sizes below one element (1 and 3 bytes) still move one element per chunk; the rule (0,
// the default) moves these short segments whole. Both must give the reference.
TEST_F(RingTest, ChunkSizeEdgesGiveTheReference) {
  for (size_t chunk_bytes : {size_t{0}, size_t{1}, size_t{3}}) {
    auto ring = make_communicator("ring(mpi)", test_options(chunk_bytes));
    for (DType dtype : {DType::f32, DType::i8, DType::bf16}) {
      for (size_t count : {size_t{7}, size_t{64}}) {
        SCOPED_TRACE("chunk_bytes=" + std::to_string(chunk_bytes) + "/" + std::string(name(dtype)) + "/" +
                     std::to_string(count));
        expect_all_reduce_in_place(*ring, kInputs, dtype, ReduceOp::sum, count, 4000 + count);
      }
    }
  }
}

// The rule's chunks (CommOptions' default) are far above Open MPI's eager limit, so every send
// completes only once matched (see kLargeCount). kLargeCount gives each rank a segment of about
// 4 MiB / N of f32 and 8 MiB / N of i64, every one above 1 MiB: two chunks per step at NP 2-4
// (ring_chunk_elements); out of place and in place.
TEST_F(RingTest, LargeBuffersWithDefaultChunks) {
  auto ring = make_communicator("ring(mpi)", test_options());
  for (const Case& c : large_cases({DType::f32, DType::i64})) {
    SCOPED_TRACE(std::string(name(c.dtype)) + "/" + std::string(name(c.op)));
    const std::vector<char> input = kInputs.make_input(c.dtype, c.op, n_, c.stream, rank_, c.count);
    const std::vector<char> by_mpi = expect_all_reduce_like(*ring, *mpi_, input, c);
    std::vector<char> in_place = input;
    ring->all_reduce(in_place.data(), in_place.data(), c.count, c.dtype, c.op);
    EXPECT_EQ(differences(c.dtype, in_place.data(), by_mpi.data(), c.count), "") << "all_reduce in place vs mpi";

    const size_t block = c.count / static_cast<size_t>(n_);
    const size_t block_bytes = block * size_of(c.dtype);
    std::vector<char> scattered(block_bytes), scattered_by_mpi(scattered.size());
    ring->reduce_scatter(input.data(), scattered.data(), block, c.dtype, c.op);
    mpi_->reduce_scatter(input.data(), scattered_by_mpi.data(), block, c.dtype, c.op);
    EXPECT_EQ(differences(c.dtype, scattered.data(), scattered_by_mpi.data(), block), "") << "reduce_scatter vs mpi";
    in_place = input;
    char* own = in_place.data() + static_cast<size_t>(rank_) * block_bytes;
    ring->reduce_scatter(in_place.data(), own, block, c.dtype, c.op);
    EXPECT_EQ(differences(c.dtype, own, scattered_by_mpi.data(), block), "") << "reduce_scatter in place vs mpi";

    std::vector<char> gathered(block * size_of(c.dtype) * static_cast<size_t>(n_)), gathered_by_mpi(gathered.size());
    ring->all_gather(input.data(), gathered.data(), block, c.dtype);
    mpi_->all_gather(input.data(), gathered_by_mpi.data(), block, c.dtype);
    EXPECT_EQ(differences(c.dtype, gathered.data(), gathered_by_mpi.data(), block * static_cast<size_t>(n_)), "")
        << "all_gather vs mpi";
  }
}

// An inner communicator that counts the point-to-point calls the ring makes and the
// collectives it (must not) delegate.
class CountingCommunicator final : public SpyCommunicator {
 public:
  using SpyCommunicator::SpyCommunicator;
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

  int isends = 0, irecvs = 0, wrong_peer = 0, delegated = 0;
};

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

// The pipeline really runs in chunks, and exactly as many as the schedule says. all_reduce
// splits C elements into segments of L_s = C/N (+1 for s < C%N); every step sends one segment
// in ceil(L_s/c) non-empty chunks. Over the 2(N-1) steps rank r sends every segment twice
// except segment r (only in the gather phase) and segment r+1 (only in the reduce phase), and
// receives every segment twice except r-1 and r; in place or not.
TEST_F(RingTest, PipelineSendsThePredictedNumberOfChunks) {
  constexpr size_t kChunkBytes = 64;  // 16 f32 per chunk
  constexpr size_t kChunkElements = kChunkBytes / 4;
  auto counting = std::make_unique<CountingCommunicator>(make_communicator("mpi", test_options(kTestChunkBytes)));
  CountingCommunicator& inner = *counting;
  RingCommunicator ring(std::move(counting), test_options(kChunkBytes));
  EXPECT_EQ(ring.backend(), "ring(mpi)");
  // A chunk_bytes that is set holds whatever the segment.
  EXPECT_EQ(ring.chunk_elements(DType::f32, 1000), kChunkElements);
  EXPECT_EQ(ring.chunk_elements(DType::f32, 1), kChunkElements);
  EXPECT_EQ(ring.chunk_elements(DType::f64, size_t{1} << 30), kChunkBytes / 8);

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

    for (bool in_place : {true, false}) {
      std::vector<float> data(count, 1.0f), out(count);
      inner.isends = inner.irecvs = 0;
      ring.all_reduce(data.data(), in_place ? data.data() : out.data(), count, DType::f32, ReduceOp::sum);
      EXPECT_EQ(static_cast<size_t>(inner.isends), want_isends) << "in place " << in_place;
      EXPECT_EQ(static_cast<size_t>(inner.irecvs), want_irecvs) << "in place " << in_place;
      // All ones: the sum is N everywhere.
      const std::vector<float>& result = in_place ? data : out;
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(result[i], static_cast<float>(n)) << i;
    }
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

// The chunk rule (ring.cpp says why): a segment up to 1 MiB moves whole, one chunk per step;
// from there to 8 MiB in two chunks (the reduction of one overlaps the transfer of the other);
// beyond, in chunks of 4 MiB. Segments at the edges and between them, odd ones included, in
// elements of 1, 4 and 8 bytes; a dtype's chunks are whole elements.
TEST(RingChunkRule, ChunksPerStepFollowTheSegment) {
  constexpr size_t kMiB = size_t{1} << 20;
  for (size_t width : {size_t{1}, size_t{4}, size_t{8}}) {
    SCOPED_TRACE("element of " + std::to_string(width) + " B");
    const size_t mib = kMiB / width;  // elements in 1 MiB
    auto chunks_per_step = [&](size_t segment) { return ceil_div(segment, ring_chunk_elements(segment, width)); };
    for (size_t segment : {size_t{1}, size_t{7}, mib - 1, mib}) EXPECT_EQ(chunks_per_step(segment), 1u) << segment;
    for (size_t segment : {mib + 1, 3 * mib + 7, 8 * mib}) EXPECT_EQ(chunks_per_step(segment), 2u) << segment;
    for (size_t segment : {8 * mib + 1, 32 * mib, 1024 * mib + 5}) {
      EXPECT_EQ(ring_chunk_elements(segment, width) * width, 4 * kMiB) << segment;
      EXPECT_EQ(chunks_per_step(segment), ceil_div(segment, 4 * mib)) << segment;
    }
  }
  // The rule is what an unset chunk_bytes (the default) gives.
  EXPECT_EQ(CommOptions{}.chunk_bytes, 0u);
  RingCommunicator ring(make_communicator("mpi", test_options()), test_options());
  for (size_t segment : {size_t{1}, size_t{3} << 20, size_t{100} << 20}) {
    EXPECT_EQ(ring.chunk_elements(DType::bf16, segment), ring_chunk_elements(segment, 2)) << segment;
  }
}

TEST_F(RingTest, SplitWrapsTheInnerSplit) {
  const int color = rank_ % 2;  // two interleaved halves: non-contiguous world ranks
  auto half = comm_->split(color, rank_);
  expect_interleaved_half(*half, "ring(mpi)", rank_, n_);
  const size_t count = 37;  // odd, several 64-byte chunks of i32
  expect_all_reduce_in_place(*half, kInputs, DType::i32, ReduceOp::sum, count, 5000, interleaved_members(color, n_));
}

TEST_F(RingTest, DelegatesTheOtherOperations) {
  const size_t count = 9;  // any small odd count
  std::vector<int32_t> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = rank_ == 0 ? static_cast<int32_t>(i) : -1;
  comm_->broadcast(data.data(), data.data(), count, DType::i32, 0);
  for (size_t i = 0; i < count; ++i) EXPECT_EQ(data[i], static_cast<int32_t>(i));

  std::vector<int32_t> mine(count, rank_), from_prev(count, -1);
  comm_->send_recv(mine.data(), (rank_ + 1) % n_, from_prev.data(), (rank_ - 1 + n_) % n_, count, DType::i32);
  EXPECT_EQ(from_prev, std::vector<int32_t>(count, (rank_ - 1 + n_) % n_));

  int32_t total = 0;
  comm_->reduce(&rank_, &total, 1, DType::i32, ReduceOp::sum, 0);
  if (rank_ == 0) {
    EXPECT_EQ(total, n_ * (n_ - 1) / 2);  // 0 + 1 + ... + N-1
  }

  std::vector<int32_t> to_each(static_cast<size_t>(n_), rank_), from_each(static_cast<size_t>(n_), -1);
  comm_->all_to_all(to_each.data(), from_each.data(), 1, DType::i32);
  for (int r = 0; r < n_; ++r) EXPECT_EQ(from_each[static_cast<size_t>(r)], r);
  comm_->barrier();
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
  expect_error(Error::Kind::unsupported, "all_reduce", [&] { ring.all_reduce(&x, &x, 1, DType::f32, ReduceOp::sum); });
  expect_error(Error::Kind::unsupported, "reduce_scatter",
               [&] { ring.reduce_scatter(&x, &x, 1, DType::f32, ReduceOp::sum); });
  expect_error(Error::Kind::unsupported, "all_gather", [&] { ring.all_gather(&x, &x, 1, DType::f32); });
}

TEST(RingErrors, NeedsExactlyOneInner) { expect_needs_exactly_one_inner<RingCommunicator>("ring"); }

}  // namespace
}  // namespace dts

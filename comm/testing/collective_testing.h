// Shared pieces of the backends' MPI tests (comm/**/*_mpi_test.cpp), above reference.h: bounded
// options, the sweep of cases, the checks each algorithm backend must pass against the reference
// and against mpi, a fixture over both, and the expectations every wrapper backend shares.
// Header-only: each test binary links GoogleTest and dts_comm already.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "comm/testing/reference.h"
#include "core/dtype.h"
#include "core/element.h"
#include "core/error.h"
#include "core/philox.h"

namespace dts::testing {

// Bounds every wait of a backend under test: a schedule bug fails the test instead of hanging
// until ctest's 600 s.
inline constexpr double kTestTimeoutSeconds = 60;

// Options for a backend under test: waits bounded, the pipeline in chunks of `chunk_bytes`.
inline CommOptions test_options(size_t chunk_bytes = CommOptions{}.chunk_bytes) {
  CommOptions options;
  options.timeout_seconds = kTestTimeoutSeconds;
  options.chunk_bytes = chunk_bytes;
  return options;
}

// One case of a sweep: what its SCOPED_TRACE names and what Inputs draws for it.
struct Case {
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;  // for an operation that does not reduce, sum: what its inputs are drawn for
  size_t count = 0;
  bool in_place = false;
  uint64_t stream = 0;  // this case's own inputs
};

inline std::string case_name(std::string_view operation, const Case& c) {
  return case_name(operation, c.dtype, c.op, c.count, c.in_place);
}

// Every dtype, op, count and placement, in that order, on the streams after `stream` (stream + 1,
// stream + 2, ...): a test's streams stay apart from another test's by its starting value.
inline std::vector<Case> reduction_cases(const std::vector<size_t>& counts, uint64_t stream) {
  std::vector<Case> cases;
  for (DType dtype : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) {
      for (size_t count : counts) {
        for (bool in_place : {false, true}) cases.push_back({dtype, op, count, in_place, ++stream});
      }
    }
  }
  return cases;
}

// Every dtype, count and placement, for an operation that moves data without reducing it.
inline std::vector<Case> data_cases(const std::vector<size_t>& counts, uint64_t stream) {
  std::vector<Case> cases;
  for (DType dtype : kAllDTypes) {
    for (size_t count : counts) {
      for (bool in_place : {false, true}) cases.push_back({dtype, ReduceOp::sum, count, in_place, ++stream});
    }
  }
  return cases;
}

// 2^20 + 3 elements (4 MiB of f32; 1 mod 2 and mod 3, 3 mod 4, so no N in 2..4 divides it): every
// message of any schedule is far above Open MPI's eager limit (4 KiB over shared memory), so a send
// completes only once matched (rendezvous), the path where buffer reuse and the order of posting
// matter.
inline constexpr size_t kLargeCount = (size_t{1} << 20) + 3;

// sum and avg (the sum, then a divide) of each of `dtypes` at kLargeCount, out of place, each op on
// its own stream.
inline std::vector<Case> large_cases(std::initializer_list<DType> dtypes) {
  std::vector<Case> cases;
  for (DType dtype : dtypes) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
      cases.push_back({dtype, op, kLargeCount, false, 6000 + static_cast<uint64_t>(op)});
    }
  }
  return cases;
}

// Inputs whose results are not exact: floats in [0.5, 1.5), whose sums and products round, so the
// order of combination shows in the bits; with `signed_zeros`, +0 and -0 at random (min and max of
// +0 and -0 keep whichever came first). Reproducible from the seed, one stream per rank.
inline std::vector<char> inexact_input(const Inputs& inputs, DType dtype, int rank, size_t count,
                                       bool signed_zeros = false) {
  constexpr uint64_t kInexactStreams = 3000;  // apart from the exact inputs' streams
  std::vector<char> data(count * size_of(dtype));
  for (size_t i = 0; i < count; ++i) {
    const double u = philox_uniform(inputs.seed, kInexactStreams + static_cast<uint64_t>(rank), i);
    store_double(dtype, data.data(), i, signed_zeros ? (u < 0.5 ? 0.0 : -0.0) : 0.5 + u);
  }
  return data;
}

// all_reduce of this rank's input for `c` on `comm`: the reference, bit for bit, and the same bits
// as `baseline` (when given); out of place the input untouched; nothing written past the output.
inline void expect_all_reduce_matches(Communicator& comm, const Inputs& inputs, const Case& c,
                                      Communicator* baseline = nullptr) {
  const int n = comm.size();
  const size_t bytes = c.count * size_of(c.dtype);
  const std::vector<char> input = inputs.make_input(c.dtype, c.op, n, c.stream, comm.rank(), c.count);
  const std::vector<char> want = inputs.reference_reduced(c.dtype, c.op, n, c.stream, 0, c.count);
  std::vector<char> got(bytes + kGuardBytes, kGuardByte);
  if (c.in_place) {
    if (bytes > 0) std::memcpy(got.data(), input.data(), bytes);
    comm.all_reduce(got.data(), got.data(), c.count, c.dtype, c.op);
  } else {
    const std::vector<char> before = input;
    comm.all_reduce(input.data(), got.data(), c.count, c.dtype, c.op);
    EXPECT_EQ(input, before) << "out of place must not write the input";
  }
  EXPECT_EQ(differences(c.dtype, got.data(), want.data(), c.count), "") << "vs reference";
  if (baseline != nullptr) {
    std::vector<char> by_baseline(bytes);
    baseline->all_reduce(input.data(), by_baseline.data(), c.count, c.dtype, c.op);
    EXPECT_EQ(differences(c.dtype, got.data(), by_baseline.data(), c.count), "") << "vs " << baseline->backend();
  }
  EXPECT_TRUE(guard_intact(got, bytes)) << "wrote past the output";
}

// all_reduce out of place of `input` on `comm` and on `baseline`: the same bits. Returns the
// baseline's result, for the checks of other operations that follow.
inline std::vector<char> expect_all_reduce_like(Communicator& comm, Communicator& baseline,
                                                const std::vector<char>& input, const Case& c) {
  std::vector<char> got(input.size()), by_baseline(input.size());
  comm.all_reduce(input.data(), got.data(), c.count, c.dtype, c.op);
  baseline.all_reduce(input.data(), by_baseline.data(), c.count, c.dtype, c.op);
  EXPECT_EQ(differences(c.dtype, got.data(), by_baseline.data(), c.count), "")
      << "all_reduce out of place vs " << baseline.backend();
  return by_baseline;
}

// all_reduce in place on `group`, whose members are the world ranks `members` (by default the
// whole world), of this rank's input drawn for the world: the reference over those members.
inline void expect_all_reduce_in_place(Communicator& group, const Inputs& inputs, DType dtype, ReduceOp op,
                                       size_t count, uint64_t stream,
                                       const std::vector<int>& members = all_ranks(world_size())) {
  std::vector<char> data = inputs.make_input(dtype, op, world_size(), stream, world_rank(), count);
  group.all_reduce(data.data(), data.data(), count, dtype, op);
  const std::vector<char> want = inputs.reference_reduced(dtype, op, world_size(), stream, 0, count, members);
  EXPECT_EQ(differences(dtype, data.data(), want.data(), count), "");
}

// all_gather of this rank's block `input` (c.count elements) on `comm` into `out` (room for every
// rank's block, and any guard bytes after), in the case's placement: in place as NCCL has it, the
// input first copied into this rank's block of `out`.
inline void all_gather_into(Communicator& comm, const std::vector<char>& input, const Case& c, std::vector<char>& out) {
  if (c.in_place) {
    char* own = out.data() + static_cast<size_t>(comm.rank()) * input.size();
    if (!input.empty()) std::memcpy(own, input.data(), input.size());
    comm.all_gather(own, out.data(), c.count, c.dtype);
  } else {
    comm.all_gather(input.data(), out.data(), c.count, c.dtype);
  }
}

// Every rank's `data` gathered over `world`: each must hold the same bits as this rank.
inline void expect_same_bits_on_every_rank(Communicator& world, DType dtype, const std::vector<char>& data,
                                           size_t count) {
  const size_t width = size_of(dtype);
  std::vector<char> everyone(count * width * static_cast<size_t>(world.size()));
  world.all_gather(data.data(), everyone.data(), count, dtype);
  for (int r = 0; r < world.size(); ++r) {
    EXPECT_EQ(differences(dtype, everyone.data() + static_cast<size_t>(r) * count * width, data.data(), count), "")
        << "rank " << r << " holds other bits";
  }
}

// The fixture of an algorithm backend's tests: the backend under test (`comm_`, made from the
// spec the derived fixture names) and the mpi backend it must agree with, both over the world.
class AlgorithmTest : public ::testing::Test {
 protected:
  AlgorithmTest(std::string spec, CommOptions options) : spec_(std::move(spec)), options_(std::move(options)) {}

  void SetUp() override {
    comm_ = make_communicator(spec_, options_);
    mpi_ = make_communicator("mpi", options_);
    n_ = comm_->size();
    rank_ = comm_->rank();
  }

  std::unique_ptr<Communicator> comm_, mpi_;
  int n_ = 1;
  int rank_ = 0;

 private:
  std::string spec_;
  CommOptions options_;
};

// What a wrapper backend over mpi says of itself: its inner's version, the world's rank and size,
// host memory; and that it is registered as `wrapper`(INNER).
inline void expect_describes_wrapper(const Communicator& comm, const Communicator& inner, std::string_view wrapper) {
  EXPECT_EQ(comm.version(), inner.version());
  EXPECT_EQ(comm.rank(), world_rank());
  EXPECT_EQ(comm.size(), world_size());
  EXPECT_EQ(comm.memory(), Memory::host);
  bool listed = false;
  for (const auto& info : registered_backends()) {
    listed = listed || (info.name == wrapper && info.usage == std::string(wrapper) + "(INNER)");
  }
  EXPECT_TRUE(listed);
}

// The world ranks of one half of a split by color rank % 2 (the evens or the odds), in order:
// groups whose world ranks are not contiguous.
inline std::vector<int> interleaved_members(int color, int n) {
  std::vector<int> members;
  for (int r = color; r < n; r += 2) members.push_back(r);
  return members;
}

// What this rank's half of that split (key: the world rank) must say of itself.
inline void expect_interleaved_half(const Communicator& half, std::string_view backend, int world_rank, int n) {
  const int color = world_rank % 2;
  EXPECT_EQ(half.backend(), backend);
  EXPECT_EQ(half.size(), (n + 1 - color) / 2);  // evens: ceil(N/2), odds: floor(N/2)
  EXPECT_EQ(half.rank(), world_rank / 2);
}

// The base of a spy: an inner backend that records what an algorithm asks of it. It answers as
// its inner does (the same name, so the algorithm's spec reads as over that inner) and forwards
// barrier and split; a spy overrides, records and forwards the operations it watches. Any other
// operation keeps Communicator's default body (in the end Error{unsupported}), so an algorithm that
// reaches for one fails loudly instead of slipping past the counts.
class SpyCommunicator : public Communicator {
 public:
  explicit SpyCommunicator(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)) {}
  std::string_view backend() const override { return inner_->backend(); }
  std::string version() const override { return inner_->version(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Memory memory() const override { return inner_->memory(); }
  void barrier() override { inner_->barrier(); }
  std::unique_ptr<Communicator> split(int color, int key) override { return inner_->split(color, key); }

 protected:
  std::unique_ptr<Communicator> inner_;
};

// Runs `call`, which must throw Error{kind}: no error, or another kind, is a failure naming `what`.
template <typename Call>
void expect_error(Error::Kind kind, std::string_view what, Call&& call) {
  try {
    std::forward<Call>(call)();
    ADD_FAILURE() << what << ": expected Error{" << name(kind) << "}";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << what << ": " << e.what();
  }
}

// A wrapper's spec names exactly one inner ("ring" and "ring(mpi,mpi)" are invalid), and `Wrapper`
// refuses a null inner.
template <typename Wrapper>
void expect_needs_exactly_one_inner(std::string_view wrapper) {
  for (const std::string& spec : {std::string(wrapper), std::string(wrapper) + "(mpi,mpi)"}) {
    expect_error(Error::Kind::invalid_argument, spec, [&] { make_communicator(spec); });
  }
  EXPECT_THROW(Wrapper(nullptr, CommOptions{}), Error);
}

}  // namespace dts::testing

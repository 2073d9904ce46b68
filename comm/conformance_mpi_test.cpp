// One conformance test for every backend (NP 1 2 3 4): each spec of kConformingBackends runs every
// collective and point-to-point operation on exact inputs and must match, bit for bit, a reference
// each rank computes from every rank's inputs. Run: ctest -R conformance_mpi_test --output-on-failure
#include <gtest/gtest.h>
#include <mpi.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "comm/testing/host_staging.h"
#include "comm/testing/reference.h"
#include "core/element.h"
#include "dts/config.h"

namespace dts {
namespace {

// The backends that must give the reference's bits. Adding a backend adds one line here.
constexpr std::array<std::string_view, 8> kConformingBackends{
    "mpi",
    "ring(mpi)",
    "faulty(delay(0),mpi)",        // a fault that changes no result: the wrapper itself must conform
    "ring(faulty(delay(0),mpi))",  // the ring over the wrapper's point-to-point calls
    "tree(mpi)",
    "hier(mpi)",        // one node here (the host name): hier_mpi_test makes layouts of several
    "hier(ring(mpi))",  // the phases on the ring's point-to-point code
    "hier(tree(mpi))",  // across nodes by recursive doubling; broadcast and reduce by the tree
};

// Device-memory backends of this build: the sweep reaches them through testing::HostStaging (its
// host buffers copied to the device and back). nccl SKIPs on a machine without a device; staged
// runs there on the emulated device, whose memory host code cannot read but through the copies.
#if DTS_HAVE_NCCL
constexpr std::array<std::string_view, 3> kDeviceBackends{"staged(mpi)", "staged(ring(mpi))", "nccl"};
#else
constexpr std::array<std::string_view, 2> kDeviceBackends{"staged(mpi)", "staged(ring(mpi))"};
#endif

// Gloo, in builds with it (Debian's libgloo-dev): its own algorithms (all_reduce by its ring and
// by bcube), and the ring over its point-to-point calls.
#if DTS_HAVE_GLOO
constexpr std::array<std::string_view, 3> kGlooBackends{"gloo", "gloo(bcube)", "ring(gloo)"};
#else
constexpr std::array<std::string_view, 0> kGlooBackends{};
#endif

std::vector<std::string_view> conforming_backends() {
  std::vector<std::string_view> specs(kConformingBackends.begin(), kConformingBackends.end());
  specs.insert(specs.end(), kGlooBackends.begin(), kGlooBackends.end());
  specs.insert(specs.end(), kDeviceBackends.begin(), kDeviceBackends.end());
  return specs;
}

// Registered backends that cannot conform on their own, each with the reason. Empty today: faulty
// needs a fault kind, and its conforming form is listed above. A backend registered but listed in
// neither list fails ConformanceList.EveryRegisteredBackendIsListed.
constexpr std::array<std::string_view, 0> kCannotConformAlone{};

constexpr testing::Inputs kInputs{0xC0DE};  // inputs only need to be reproducible
using testing::differences;
using testing::guard_intact;
using testing::kGuardByte;
using testing::kGuardBytes;

// 0 and 1 are the edges; 1021 is prime (no rank count divides it, so segments are uneven) and,
// with kChunkBytes, spans several chunks of the ring's pipeline in every dtype.
constexpr std::array<size_t, 3> kCounts{0, 1, 1021};
// Small chunks, so ring(...) runs its pipeline over many chunks even at 1021 elements.
constexpr size_t kChunkBytes = 256;
// Bounds every wait: a backend that loses a message fails instead of hanging ctest for 600 s.
constexpr std::chrono::seconds kTimeout{60};

// One case of a sweep. `op` is the reduction (reductions only; the others draw inputs as for sum)
// and `root` the root of broadcast and reduce (0 for the others).
struct Case {
  DType dtype;
  ReduceOp op;
  size_t count;
  bool in_place;
  int root;
  uint64_t stream;  // tells this case's inputs apart from every other case's
};

// What varies in an operation's sweep.
struct Shape {
  bool reduces;
  bool has_in_place;
  bool rooted;
};

std::string test_name(std::string_view spec) {
  std::string name;
  for (const char c : spec) {
    const bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (word) name += c;
    else if (!name.empty() && name.back() != '_') name += '_';
  }
  while (!name.empty() && name.back() == '_') name.pop_back();
  return name;
}

class Conformance : public ::testing::TestWithParam<std::string_view> {
 protected:
  void SetUp() override {
    CommOptions options;
    options.chunk_bytes = kChunkBytes;
    options.timeout_seconds = static_cast<double>(kTimeout.count());
    try {
      comm_ = make_communicator(GetParam(), options);
    } catch (const Error& e) {
      // "nccl: no CUDA device visible to this rank": every rank of a machine decides alike.
      if (e.kind() == Error::Kind::unsupported) GTEST_SKIP() << e.what();
      throw;
    }
    if (comm_->reaches_device_by_copies() && cuda_device_count() == 0) use_device_kind(DeviceKind::emulated);
    if (comm_->memory() == Memory::device) comm_ = std::make_unique<testing::HostStaging>(std::move(comm_));
    n_ = comm_->size();
    rank_ = comm_->rank();
    next_ = (rank_ + 1) % n_;
    prev_ = (rank_ - 1 + n_) % n_;
  }

  // An operation the backend does not implement (Error{unsupported}) is a SKIP that names it.
  void TearDown() override {
    if (unsupported_.empty()) return;
    std::string list;
    for (size_t i = 0; i < unsupported_.size() && i < 3; ++i) list += "\n  " + unsupported_[i];
    GTEST_SKIP() << GetParam() << ": " << unsupported_.size() << " case(s) unsupported, first:" << list;
  }

  // Runs `body` for every case: each dtype and count, each op (reductions), both placements
  // (where the operation has an in-place form) and each root (broadcast, reduce). A case that
  // throws is recorded and the sweep goes on, so every rank stays at the same case.
  void sweep(std::string_view operation, Shape shape, const std::function<void(const Case&)>& body) {
    const std::vector<ReduceOp> ops =
        shape.reduces ? std::vector<ReduceOp>(kAllReduceOps.begin(), kAllReduceOps.end())
                      : std::vector<ReduceOp>{ReduceOp::sum};
    for (const DType dtype : kAllDTypes) {
      for (const ReduceOp op : ops) {
        for (const size_t count : kCounts) {
          for (const bool in_place : {false, true}) {
            if (in_place && !shape.has_in_place) continue;
            for (int root = 0; root < (shape.rooted ? n_ : 1); ++root) {
              const Case c{dtype, op, count, in_place, root, ++stream_};
              std::string name = std::string(operation) + "/" + std::string(dts::name(dtype));
              if (shape.reduces) name += "/" + std::string(dts::name(op));
              name += "/" + std::to_string(count) + (in_place ? "/in_place" : "/out_of_place");
              if (shape.rooted) name += "/root" + std::to_string(root);
              run_case(name, [&] { body(c); });
            }
          }
        }
      }
    }
  }

  // Rank `rank`'s input of `count` elements for case `c`.
  std::vector<char> input(const Case& c, int rank, size_t count) const {
    return kInputs.make_input(c.dtype, c.op, n_, c.stream, rank, count);
  }
  // `count` elements of output followed by guard bytes; the output part starts as guard bytes too.
  static std::vector<char> guarded(DType dtype, size_t count) {
    return std::vector<char>(count * size_of(dtype) + kGuardBytes, kGuardByte);
  }
  static std::vector<char> guarded_copy(const std::vector<char>& data) {
    std::vector<char> buffer = data;
    buffer.resize(data.size() + kGuardBytes, kGuardByte);
    return buffer;
  }
  // `got` (of `count` elements, then the guard) must equal `want` bit for bit.
  static void expect_bits(DType dtype, const std::vector<char>& got, const char* result, const std::vector<char>& want,
                          size_t count, size_t used_bytes) {
    EXPECT_EQ(differences(dtype, result, want.data(), count), "");
    EXPECT_TRUE(guard_intact(got, used_bytes)) << "wrote past the output";
  }
  static void expect_bits(DType dtype, const std::vector<char>& got, const std::vector<char>& want, size_t count) {
    expect_bits(dtype, got, got.data(), want, count, count * size_of(dtype));
  }

  std::unique_ptr<Communicator> comm_;
  int n_ = 1, rank_ = 0, next_ = 0, prev_ = 0;

 private:
  template <class Body>
  void run_case(const std::string& name, Body&& body) {
    SCOPED_TRACE(name);
    try {
      body();
    } catch (const Error& e) {
      if (e.kind() == Error::Kind::unsupported) {
        unsupported_.push_back(name + ": " + e.what());
      } else {
        ADD_FAILURE() << name << " threw " << e.what();
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << name << " threw " << e.what();
    }
  }

  uint64_t stream_ = 0;
  std::vector<std::string> unsupported_;

 protected:
  uint64_t probe_stream_ = 1u << 20;  // inputs of the tests outside sweep(), apart from its streams
};

// ---------------------------------------------------------------------------------------------
// Collectives.

TEST_P(Conformance, AllReduce) {
  sweep("all_reduce", {true, true, false}, [&](const Case& c) {
    const std::vector<char> in = input(c, rank_, c.count);
    std::vector<char> got = c.in_place ? guarded_copy(in) : guarded(c.dtype, c.count);
    comm_->all_reduce(c.in_place ? got.data() : in.data(), got.data(), c.count, c.dtype, c.op);
    expect_bits(c.dtype, got, kInputs.reference_reduced(c.dtype, c.op, n_, c.stream, 0, c.count), c.count);
    if (!c.in_place) {
      EXPECT_EQ(in, input(c, rank_, c.count)) << "out of place must not write the input";
    }
  });
}

TEST_P(Conformance, ReduceScatter) {
  sweep("reduce_scatter", {true, true, false}, [&](const Case& c) {
    const size_t width = size_of(c.dtype), total = c.count * static_cast<size_t>(n_);
    const size_t own = static_cast<size_t>(rank_) * c.count;
    const std::vector<char> in = input(c, rank_, total);
    const std::vector<char> want = kInputs.reference_reduced(c.dtype, c.op, n_, c.stream, own, c.count);
    if (c.in_place) {
      // NCCL's convention: out == in + rank * count, the result lands in this rank's block.
      std::vector<char> buffer = guarded_copy(in);
      comm_->reduce_scatter(buffer.data(), buffer.data() + own * width, c.count, c.dtype, c.op);
      expect_bits(c.dtype, buffer, buffer.data() + own * width, want, c.count, total * width);
    } else {
      std::vector<char> got = guarded(c.dtype, c.count);
      comm_->reduce_scatter(in.data(), got.data(), c.count, c.dtype, c.op);
      expect_bits(c.dtype, got, want, c.count);
      EXPECT_EQ(in, input(c, rank_, total)) << "out of place must not write the input";
    }
  });
}

TEST_P(Conformance, AllGather) {
  sweep("all_gather", {false, true, false}, [&](const Case& c) {
    const size_t width = size_of(c.dtype), total = c.count * static_cast<size_t>(n_);
    const size_t own = static_cast<size_t>(rank_) * c.count;
    const std::vector<char> in = input(c, rank_, c.count);
    std::vector<char> got = guarded(c.dtype, total);
    if (c.in_place) {
      // NCCL's convention: in == out + rank * count, this rank's block already in place.
      if (!in.empty()) std::memcpy(got.data() + own * width, in.data(), in.size());
      comm_->all_gather(got.data() + own * width, got.data(), c.count, c.dtype);
    } else {
      comm_->all_gather(in.data(), got.data(), c.count, c.dtype);
    }
    expect_bits(c.dtype, got, kInputs.reference_gathered(c.dtype, c.op, n_, c.stream, c.count), total);
  });
}

TEST_P(Conformance, BroadcastFromEveryRoot) {
  sweep("broadcast", {false, true, true}, [&](const Case& c) {
    // Every rank has an input of its own; only the root's may arrive.
    const std::vector<char> in = input(c, rank_, c.count);
    std::vector<char> got = c.in_place ? guarded_copy(in) : guarded(c.dtype, c.count);
    comm_->broadcast(c.in_place ? got.data() : in.data(), got.data(), c.count, c.dtype, c.root);
    expect_bits(c.dtype, got, input(c, c.root, c.count), c.count);
  });
}

TEST_P(Conformance, ReduceToEveryRoot) {
  sweep("reduce", {true, true, true}, [&](const Case& c) {
    const std::vector<char> in = input(c, rank_, c.count);
    std::vector<char> got = c.in_place ? guarded_copy(in) : guarded(c.dtype, c.count);
    comm_->reduce(c.in_place ? got.data() : in.data(), got.data(), c.count, c.dtype, c.op, c.root);
    // Only the root's output is defined; every rank must still stay inside its buffer.
    if (rank_ == c.root) {
      expect_bits(c.dtype, got, kInputs.reference_reduced(c.dtype, c.op, n_, c.stream, 0, c.count), c.count);
    } else {
      EXPECT_TRUE(guard_intact(got, c.count * size_of(c.dtype))) << "wrote past the output";
    }
  });
}

TEST_P(Conformance, AllToAll) {
  sweep("all_to_all", {false, true, false}, [&](const Case& c) {
    const size_t total = c.count * static_cast<size_t>(n_);
    const std::vector<char> in = input(c, rank_, total);
    // Block j of the output is block `rank` of rank j's input.
    std::vector<char> want(total * size_of(c.dtype));
    for (int from = 0; from < n_; ++from) {
      for (size_t i = 0; i < c.count; ++i) {
        const size_t source = static_cast<size_t>(rank_) * c.count + i;
        store_double(c.dtype, want.data(), static_cast<size_t>(from) * c.count + i,
                     kInputs.input_value(c.dtype, c.op, n_, c.stream, from, source));
      }
    }
    std::vector<char> got = c.in_place ? guarded_copy(in) : guarded(c.dtype, total);
    comm_->all_to_all(c.in_place ? got.data() : in.data(), got.data(), c.count, c.dtype);
    expect_bits(c.dtype, got, want, total);
  });
}

TEST_P(Conformance, AllReduceAsync) {
  sweep("all_reduce_async", {true, true, false}, [&](const Case& c) {
    const std::vector<char> in = input(c, rank_, c.count);
    std::vector<char> got = c.in_place ? guarded_copy(in) : guarded(c.dtype, c.count);
    comm_->all_reduce_async(c.in_place ? got.data() : in.data(), got.data(), c.count, c.dtype, c.op)->wait(kTimeout);
    expect_bits(c.dtype, got, kInputs.reference_reduced(c.dtype, c.op, n_, c.stream, 0, c.count), c.count);
  });
}

// ---------------------------------------------------------------------------------------------
// Point to point: each rank passes its input to the next rank and must receive the previous one's.

TEST_P(Conformance, SendRecv) {
  sweep("send/recv", {false, false, false}, [&](const Case& c) {
    const std::vector<char> in = input(c, rank_, c.count);
    std::vector<char> got = guarded(c.dtype, c.count);
    if (n_ == 1) {
      // To itself, a blocking send only completes against a receive already posted (without MPI
      // buffering), and a blocking recv against a send already posted: test each that way.
      auto receiving = comm_->irecv(got.data(), c.count, c.dtype, prev_);
      comm_->send(in.data(), c.count, c.dtype, next_);
      receiving->wait(kTimeout);
      expect_bits(c.dtype, got, input(c, prev_, c.count), c.count);
      got = guarded(c.dtype, c.count);
      auto sending = comm_->isend(in.data(), c.count, c.dtype, next_);
      comm_->recv(got.data(), c.count, c.dtype, prev_);
      sending->wait(kTimeout);
    } else if (rank_ % 2 == 0) {
      // Even ranks send first, odd ranks receive first, so no cycle of sends waits on itself: the
      // one even-to-even send (N odd: N-1 to 0) is received once rank 1 took rank 0's send.
      comm_->send(in.data(), c.count, c.dtype, next_);
      comm_->recv(got.data(), c.count, c.dtype, prev_);
    } else {
      comm_->recv(got.data(), c.count, c.dtype, prev_);
      comm_->send(in.data(), c.count, c.dtype, next_);
    }
    expect_bits(c.dtype, got, input(c, prev_, c.count), c.count);
  });
}

TEST_P(Conformance, IsendIrecv) {
  sweep("isend/irecv", {false, false, false}, [&](const Case& c) {
    const std::vector<char> in = input(c, rank_, c.count);
    std::vector<char> got = guarded(c.dtype, c.count);
    auto receiving = comm_->irecv(got.data(), c.count, c.dtype, prev_);
    auto sending = comm_->isend(in.data(), c.count, c.dtype, next_);
    sending->wait(kTimeout);
    receiving->wait(kTimeout);
    expect_bits(c.dtype, got, input(c, prev_, c.count), c.count);
  });
}

TEST_P(Conformance, SendRecvExchange) {
  sweep("send_recv", {false, true, false}, [&](const Case& c) {
    const std::vector<char> in = input(c, rank_, c.count);
    std::vector<char> got = c.in_place ? guarded_copy(in) : guarded(c.dtype, c.count);
    comm_->send_recv(c.in_place ? got.data() : in.data(), next_, got.data(), prev_, c.count, c.dtype);
    expect_bits(c.dtype, got, input(c, prev_, c.count), c.count);
  });
}

// ---------------------------------------------------------------------------------------------
// A communicator's life: what a refused call and a split leave behind.

// Every dtype (fp8 too) with every reduction, on zeros: a backend either runs the call or refuses
// it as unsupported (a SKIP in the suites); either way the communicator still gives the reference
// bits afterwards. Caught: NCCL's nonblocking communicator, which keeps an invalid argument (avg on
// fp8, NCCL 2.28.9) as its state and refuses every later call, so one refused case failed every
// case after it.
TEST_P(Conformance, RefusedCallLeavesCommunicatorUsable) {
  std::vector<DType> dtypes(kAllDTypes.begin(), kAllDTypes.end());
  dtypes.insert(dtypes.end(), kFp8DTypes.begin(), kFp8DTypes.end());
  constexpr size_t kCount = 5;  // small and odd: the call, not the size, is under test
  const Case after{DType::f32, ReduceOp::sum, 1021, false, 0, ++probe_stream_};
  for (const DType dtype : dtypes) {
    for (const ReduceOp op : kAllReduceOps) {
      SCOPED_TRACE(std::string(name(dtype)) + "/" + std::string(name(op)));
      std::vector<char> zeros(kCount * size_of(dtype), 0), out(kCount * size_of(dtype), 0);
      try {
        comm_->all_reduce(zeros.data(), out.data(), kCount, dtype, op);
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), Error::Kind::unsupported) << "refused, but not as unsupported: " << e.what();
      }
      const std::vector<char> in = input(after, rank_, after.count);
      std::vector<char> got = guarded(after.dtype, after.count);
      comm_->all_reduce(in.data(), got.data(), after.count, after.dtype, after.op);
      expect_bits(after.dtype, got, kInputs.reference_reduced(after.dtype, after.op, n_, after.stream, 0, after.count),
                  after.count);
    }
  }
}

// Groups of a split (even and odd ranks, in reverse order of rank) reduce among themselves. Caught:
// ncclCommSplit on a nonblocking communicator returns before NCCL publishes the child, which a
// backend that settled only the call's answer took as "operation in progress" (NCCL 2.28.9).
TEST_P(Conformance, SplitGroupsReduceAmongThemselves) {
  const int color = rank_ % 2, key = n_ - rank_;
  std::unique_ptr<Communicator> group = comm_->split(color, key);
  ASSERT_NE(group, nullptr);
  // Members of this rank's group, in the group's rank order (descending world rank).
  std::vector<int> members;
  for (int r = n_ - 1; r >= 0; --r) {
    if (r % 2 == color) members.push_back(r);
  }
  ASSERT_EQ(group->size(), static_cast<int>(members.size()));
  EXPECT_EQ(members[static_cast<size_t>(group->rank())], rank_);
  // i32 sum of world ranks' inputs: exact in any order, so the reference is a plain sum.
  constexpr size_t kCount = 1021;
  std::vector<int32_t> in(kCount), got(kCount, -1), want(kCount, 0);
  for (size_t i = 0; i < kCount; ++i) in[i] = static_cast<int32_t>(1000 * rank_ + static_cast<int>(i));
  for (const int r : members) {
    for (size_t i = 0; i < kCount; ++i) want[i] += static_cast<int32_t>(1000 * r + static_cast<int>(i));
  }
  group->all_reduce(in.data(), got.data(), kCount, DType::i32, ReduceOp::sum);
  EXPECT_EQ(got, want);
  comm_->barrier();  // the parent still works beside its child
}

std::string backend_case_name(const ::testing::TestParamInfo<std::string_view>& info) {
  return test_name(info.param);
}

INSTANTIATE_TEST_SUITE_P(Backends, Conformance, ::testing::ValuesIn(conforming_backends()), backend_case_name);

// ---------------------------------------------------------------------------------------------

TEST(ConformanceList, EveryRegisteredBackendIsListed) {
  std::set<std::string> listed;
  for (const std::string_view spec : conforming_backends()) listed.insert(parse_backend_spec(spec).name);
  for (const std::string_view name : kCannotConformAlone) listed.emplace(name);
  for (const BackendInfo& info : registered_backends()) {
    EXPECT_TRUE(listed.contains(info.name))
        << info.usage << " is registered but neither in kConformingBackends nor in kCannotConformAlone";
  }
}

}  // namespace
}  // namespace dts

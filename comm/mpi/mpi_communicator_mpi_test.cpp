// Tests of the `mpi` backend under mpirun (NP 1 2 3 4): every collective against a reference that
// each rank computes from every rank's inputs, for all dtypes (f16/bf16 through user ops) and ops
// (avg: integer truncation, float rounding), in and out of place, counts 0/1/odd, roots swept.
#include <gtest/gtest.h>
#include <mpi.h>

#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/mpi/mpi_communicator.h"
#include "comm/testing/collective_testing.h"
#include "core/element.h"

namespace dts {
namespace {

using namespace ::dts::testing;  // the shared test pieces: inputs, references, checks
constexpr Inputs kInputs{0xC0FFEE};  // inputs only need to be reproducible

// 0 and 1 are the edges; 2 and 3 are below N at NP 4; 7 is odd; 129 is odd and crosses
// 128, a size where some MPI algorithms switch.
const std::vector<size_t> kCounts{0, 1, 2, 3, 7, 129};

class MpiBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    comm_ = make_communicator("mpi", test_options());
    n_ = comm_->size();
    rank_ = comm_->rank();
  }
  std::unique_ptr<Communicator> comm_;
  int n_ = 1;
  int rank_ = 0;
};

TEST_F(MpiBackendTest, Identity) {
  EXPECT_EQ(comm_->backend(), "mpi");
  EXPECT_EQ(comm_->rank(), world_rank());
  EXPECT_EQ(comm_->size(), world_size());
  EXPECT_EQ(comm_->memory(), Memory::host);
  EXPECT_FALSE(comm_->version().empty());
  EXPECT_EQ(comm_->version(), mpi_library_version());
  EXPECT_EQ(comm_->version().find('\n'), std::string::npos) << "first line only";
  comm_->barrier();
}

// The library's settings that make another stack: Open MPI's component selections and forced
// tuned algorithms, MPICH's control variables; sorted, whatever the environment's order. Tuning
// that selects no component (mpi_yield_when_idle), the launcher's own variables and other
// programs' are left out, so an unchanged stack keeps an empty identity.
TEST(MpiSettings, ComponentSelectionsAndControlVariablesOnly) {
  EXPECT_EQ(mpi_settings({}), "");
  EXPECT_EQ(mpi_settings({"OMPI_MCA_mpi_yield_when_idle=1", "OMPI_MCA_orte_ess_num_procs=4", "PATH=/bin",
                          "OMPI_COMM_WORLD_SIZE=4", "MPIR_CVAR_=x", "NOEQUALS"}),
            "");
  EXPECT_EQ(mpi_settings({"OMPI_MCA_op=^avx", "OMPI_MCA_btl=tcp,self", "OMPI_MCA_pml=ob1",
                          "OMPI_MCA_coll_tuned_allreduce_algorithm=4", "OMPI_MCA_mtl=ofi", "OMPI_MCA_coll=^hcoll",
                          "OMPI_MCA_osc=pt2pt"}),
            "btl=tcp,self;coll=^hcoll;coll_tuned_allreduce_algorithm=4;mtl=ofi;op=^avx;osc=pt2pt;pml=ob1");
  EXPECT_EQ(mpi_settings({"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=ring", "MPIR_CVAR_CH4_OFI_ENABLE_TAGGED=0"}),
            "ALLREDUCE_INTRA_ALGORITHM=ring;CH4_OFI_ENABLE_TAGGED=0");
  EXPECT_EQ(mpi_settings({"OMPI_MCA_btl=a=b"}), "btl=a=b");  // a value may hold '='
}

// Every integer dtype has its fixed-width name first, then C names of its width and signedness;
// each is that many bytes in the library; reductions never get MPI_CHAR; floats have one name.
TEST_F(MpiBackendTest, DatatypeNamesOfEachDtype) {
  const std::vector<std::pair<DType, std::string>> fixed{{DType::i8, "MPI_INT8_T"},   {DType::u8, "MPI_UINT8_T"},
                                                         {DType::i32, "MPI_INT32_T"}, {DType::u32, "MPI_UINT32_T"},
                                                         {DType::i64, "MPI_INT64_T"}, {DType::u64, "MPI_UINT64_T"}};
  for (const auto& [dtype, first] : fixed) {
    SCOPED_TRACE(std::string(name(dtype)));
    const std::vector<std::string> all = mpi_datatype_names(dtype, false), reducing = mpi_datatype_names(dtype, true);
    ASSERT_GE(reducing.size(), 2u) << "every integer width has a C name besides the fixed-width one";
    EXPECT_EQ(all.front(), first);
    EXPECT_EQ(reducing.front(), first);
    for (const std::string& n : reducing) EXPECT_NE(n, "MPI_CHAR") << "MPI defines no reduction on MPI_CHAR";
  }
  // The LP64 names this platform's C types give (sizeof long == 8 on x86-64 and aarch64 Linux).
  if (sizeof(long) == 8) {
    EXPECT_EQ(mpi_datatype_names(DType::i64, true),
              (std::vector<std::string>{"MPI_INT64_T", "MPI_LONG", "MPI_LONG_LONG"}));
    EXPECT_EQ(mpi_datatype_names(DType::u64, true),
              (std::vector<std::string>{"MPI_UINT64_T", "MPI_UNSIGNED_LONG", "MPI_UNSIGNED_LONG_LONG"}));
  }
  EXPECT_TRUE(mpi_datatype_names(DType::f32, true).empty());
  EXPECT_TRUE(mpi_datatype_names(DType::f8e4m3, false).empty());
}

// use_datatype_name routes later calls through that MPI datatype (the library's own name for the
// handle), "" restores the fixed-width one, and a name of another dtype is refused.
TEST_F(MpiBackendTest, UseDatatypeNameRoutesCalls) {
  auto& mpi = dynamic_cast<MpiCommunicator&>(*comm_);
  const auto library_name = [&](DType dtype) {
    char text[MPI_MAX_OBJECT_NAME] = {};
    int length = 0;
    MPI_Type_get_name(mpi.type_of(dtype), text, &length);
    return std::string(text, static_cast<size_t>(length));
  };
  for (const DType dtype : {DType::i8, DType::u8, DType::i32, DType::u32, DType::i64, DType::u64}) {
    for (const std::string& n : mpi_datatype_names(dtype, false)) {
      SCOPED_TRACE(n);
      mpi.use_datatype_name(dtype, n);
      const std::string got = library_name(dtype);
      // Open MPI and MPICH name the MPI_LONG_LONG handle by its older synonym.
      EXPECT_TRUE(got == n || (n == "MPI_LONG_LONG" && got == "MPI_LONG_LONG_INT")) << got;
      // The call goes through: a sum is exact in any name of the width.
      const std::vector<char> in = kInputs.make_input(dtype, ReduceOp::sum, n_, 7, rank_, 129);
      std::vector<char> out(in.size());
      comm_->all_reduce(in.data(), out.data(), 129, dtype, ReduceOp::sum);
      EXPECT_EQ(differences(dtype, out.data(), kInputs.reference_reduced(dtype, ReduceOp::sum, n_, 7, 0, 129).data(), 129),
                "");
    }
    mpi.use_datatype_name(dtype, "");
  }
  EXPECT_EQ(library_name(DType::u64), "MPI_UINT64_T");
  EXPECT_THROW(mpi.use_datatype_name(DType::u64, "MPI_LONG"), Error);  // signed: another dtype's
  EXPECT_THROW(mpi.use_datatype_name(DType::f32, "MPI_INT"), Error);
  EXPECT_EQ(library_name(DType::u64), "MPI_UINT64_T") << "a refused name changes nothing";
}

TEST_F(MpiBackendTest, AllReduce) {
  for (const Case& c : reduction_cases(kCounts, 0)) {
    SCOPED_TRACE(case_name("all_reduce", c));
    const std::vector<char> input = kInputs.make_input(c.dtype, c.op, n_, c.stream, rank_, c.count);
    const std::vector<char> want = kInputs.reference_reduced(c.dtype, c.op, n_, c.stream, 0, c.count);
    std::vector<char> got(input.size());
    if (c.in_place) {
      got = input;
      comm_->all_reduce(got.data(), got.data(), c.count, c.dtype, c.op);
    } else {
      comm_->all_reduce(input.data(), got.data(), c.count, c.dtype, c.op);
    }
    EXPECT_EQ(differences(c.dtype, got.data(), want.data(), c.count), "");
  }
}

TEST_F(MpiBackendTest, AllReduceAsync) {
  // Streams from 1000: apart from the other tests' streams, for variety only.
  for (const Case& c : reduction_cases({0, 1, 129}, 1000)) {
    SCOPED_TRACE(case_name("all_reduce_async", c));
    const std::vector<char> input = kInputs.make_input(c.dtype, c.op, n_, c.stream, rank_, c.count);
    const std::vector<char> want = kInputs.reference_reduced(c.dtype, c.op, n_, c.stream, 0, c.count);
    std::vector<char> got = c.in_place ? input : std::vector<char>(input.size());
    auto work = comm_->all_reduce_async(c.in_place ? got.data() : input.data(), got.data(), c.count, c.dtype, c.op);
    work->wait(std::chrono::duration<double>(kTestTimeoutSeconds));
    EXPECT_TRUE(work->test()) << "complete after wait";
    EXPECT_EQ(differences(c.dtype, got.data(), want.data(), c.count), "");
  }
}

TEST_F(MpiBackendTest, ReduceScatter) {
  for (const Case& c : reduction_cases(kCounts, 2000)) {
    SCOPED_TRACE(case_name("reduce_scatter", c));
    const size_t out_count = c.count;
    const size_t width = size_of(c.dtype);
    const size_t own = static_cast<size_t>(rank_) * out_count;
    const std::vector<char> input =
        kInputs.make_input(c.dtype, c.op, n_, c.stream, rank_, out_count * static_cast<size_t>(n_));
    const std::vector<char> want = kInputs.reference_reduced(c.dtype, c.op, n_, c.stream, own, out_count);
    std::vector<char> buffer = input, got(out_count * width);
    const char* result = got.data();
    if (c.in_place) {
      // NCCL's convention: the output is this rank's block of the input buffer.
      comm_->reduce_scatter(buffer.data(), buffer.data() + own * width, out_count, c.dtype, c.op);
      result = buffer.data() + own * width;
    } else {
      comm_->reduce_scatter(input.data(), got.data(), out_count, c.dtype, c.op);
    }
    EXPECT_EQ(differences(c.dtype, result, want.data(), out_count), "");
  }
}

TEST_F(MpiBackendTest, AllGather) {
  for (const Case& c : data_cases(kCounts, 3000)) {
    SCOPED_TRACE(case_name("all_gather", c));
    const std::vector<char> input = kInputs.make_input(c.dtype, c.op, n_, c.stream, rank_, c.count);
    const std::vector<char> want = kInputs.reference_gathered(c.dtype, c.op, n_, c.stream, c.count);
    std::vector<char> got(want.size());
    all_gather_into(*comm_, input, c, got);
    EXPECT_EQ(differences(c.dtype, got.data(), want.data(), c.count * static_cast<size_t>(n_)), "");
  }
}

TEST_F(MpiBackendTest, BroadcastFromEveryRoot) {
  uint64_t stream = 4000;
  for (DType dtype : kAllDTypes) {
    for (size_t count : kCounts) {
      for (int root = 0; root < n_; ++root) {
        for (bool in_place : {false, true}) {
          SCOPED_TRACE(case_name("broadcast", dtype, ReduceOp::sum, count, in_place) + "/root" + std::to_string(root));
          ++stream;
          const std::vector<char> input = kInputs.make_input(dtype, ReduceOp::sum, n_, stream, rank_, count);
          const std::vector<char> want = kInputs.make_input(dtype, ReduceOp::sum, n_, stream, root, count);
          std::vector<char> got = in_place ? input : std::vector<char>(input.size());
          comm_->broadcast(in_place ? got.data() : input.data(), got.data(), count, dtype, root);
          EXPECT_EQ(differences(dtype, got.data(), want.data(), count), "");
        }
      }
    }
  }
}

TEST_F(MpiBackendTest, ReduceToEveryRoot) {
  uint64_t stream = 5000;
  for (DType dtype : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}}) {
        for (int root = 0; root < n_; ++root) {
          for (bool in_place : {false, true}) {
            SCOPED_TRACE(case_name("reduce", dtype, op, count, in_place) + "/root" + std::to_string(root));
            ++stream;
            const std::vector<char> input = kInputs.make_input(dtype, op, n_, stream, rank_, count);
            std::vector<char> got = in_place ? input : std::vector<char>(input.size());
            comm_->reduce(in_place ? got.data() : input.data(), got.data(), count, dtype, op, root);
            if (rank_ != root) continue;  // only the root's output is defined
            const std::vector<char> want = kInputs.reference_reduced(dtype, op, n_, stream, 0, count);
            EXPECT_EQ(differences(dtype, got.data(), want.data(), count), "");
          }
        }
      }
    }
  }
}

TEST_F(MpiBackendTest, AllToAll) {
  for (const Case& c : data_cases(kCounts, 6000)) {
    SCOPED_TRACE(case_name("all_to_all", c));
    const size_t per_peer = c.count;
    const size_t width = size_of(c.dtype);
    const size_t total = per_peer * static_cast<size_t>(n_);
    // Block p of rank q's input goes to rank p, where it becomes block q.
    const std::vector<char> input = kInputs.make_input(c.dtype, c.op, n_, c.stream, rank_, total);
    std::vector<char> want(total * width);
    for (int q = 0; q < n_; ++q) {
      for (size_t i = 0; i < per_peer; ++i) {
        store_double(c.dtype, want.data(), static_cast<size_t>(q) * per_peer + i,
                     kInputs.input_value(c.dtype, c.op, n_, c.stream, q, static_cast<size_t>(rank_) * per_peer + i));
      }
    }
    std::vector<char> got = c.in_place ? input : std::vector<char>(input.size());
    comm_->all_to_all(c.in_place ? got.data() : input.data(), got.data(), per_peer, c.dtype);
    EXPECT_EQ(differences(c.dtype, got.data(), want.data(), total), "");
  }
}

TEST_F(MpiBackendTest, SendRecvRingExchange) {
  const int next = (rank_ + 1) % n_;
  const int prev = (rank_ - 1 + n_) % n_;
  for (const Case& c : data_cases(kCounts, 7000)) {
    SCOPED_TRACE(case_name("send_recv", c));
    const std::vector<char> input = kInputs.make_input(c.dtype, c.op, n_, c.stream, rank_, c.count);
    const std::vector<char> want = kInputs.make_input(c.dtype, c.op, n_, c.stream, prev, c.count);
    std::vector<char> got = c.in_place ? input : std::vector<char>(input.size());
    comm_->send_recv(c.in_place ? got.data() : input.data(), next, got.data(), prev, c.count, c.dtype);
    EXPECT_EQ(differences(c.dtype, got.data(), want.data(), c.count), "");

    // The same exchange with isend/irecv, receive posted first.
    std::vector<char> by_work(input.size());
    auto recv = comm_->irecv(by_work.data(), c.count, c.dtype, prev);
    auto send = comm_->isend(input.data(), c.count, c.dtype, next);
    send->wait(std::chrono::duration<double>(kTestTimeoutSeconds));
    recv->wait(std::chrono::duration<double>(kTestTimeoutSeconds));
    EXPECT_EQ(differences(c.dtype, by_work.data(), want.data(), c.count), "") << "isend/irecv";
  }
}

TEST_F(MpiBackendTest, BlockingSendRecvPairs) {
  if (n_ < 2) GTEST_SKIP() << "needs a peer: a blocking send to oneself may never return";
  // Ranks pair up (0,1), (2,3), ...; with odd N the last rank has no partner.
  const int partner = rank_ % 2 == 0 ? rank_ + 1 : rank_ - 1;
  if (partner >= n_) return;
  const size_t count = 129;  // odd
  const std::vector<char> mine = kInputs.make_input(DType::f64, ReduceOp::sum, n_, 8000, rank_, count);
  const std::vector<char> want = kInputs.make_input(DType::f64, ReduceOp::sum, n_, 8000, partner, count);
  std::vector<char> got(mine.size());
  if (rank_ % 2 == 0) {
    comm_->send(mine.data(), count, DType::f64, partner);
    comm_->recv(got.data(), count, DType::f64, partner);
  } else {
    comm_->recv(got.data(), count, DType::f64, partner);
    comm_->send(mine.data(), count, DType::f64, partner);
  }
  EXPECT_EQ(differences(DType::f64, got.data(), want.data(), count), "");
}

// avg is sum then a local divide, as NCCL defines it: integers truncate toward zero (not floor,
// not round), floats round the quotient once to nearest even.
TEST_F(MpiBackendTest, AvgTruncatesIntegersAndRoundsFloats) {
  // Rank 0 contributes {-1, 2N-1, -(2N-1)}, the others 0: exact quotients -1/N, (2N-1)/N, -(2N-1)/N.
  std::vector<int32_t> ints{0, 0, 0};
  if (rank_ == 0) ints = {-1, 2 * n_ - 1, -(2 * n_ - 1)};
  comm_->all_reduce(ints.data(), ints.data(), ints.size(), DType::i32, ReduceOp::avg);
  // trunc(-1/N) is 0 for N > 1 (floor would give -1); trunc((2N-1)/N) is 1 (rounding would give 2).
  const std::vector<int32_t> want_ints{n_ == 1 ? -1 : 0, 1, -1};
  EXPECT_EQ(ints, want_ints);

  // Rank 0 contributes 1: the average is 1/N, rounded once to each float type.
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    SCOPED_TRACE(std::string(name(dtype)));
    std::vector<char> value(size_of(dtype)), want(size_of(dtype));
    store_double(dtype, value.data(), 0, rank_ == 0 ? 1.0 : 0.0);
    comm_->all_reduce(value.data(), value.data(), 1, dtype, ReduceOp::avg);
    store_double(dtype, want.data(), 0, 1.0 / n_);
    EXPECT_EQ(differences(dtype, value.data(), want.data(), 1), "");
    if (n_ == 3) {
      // 1/3 = 0.010101...b, rounded to nearest even at each type's precision.
      uint64_t bits = 0;
      std::memcpy(&bits, value.data(), value.size());
      switch (dtype) {
        // 24 bits kept, the next ones 1 0 1..: up
        case DType::f32:
          EXPECT_EQ(bits, 0x3EAAAAABu);
          break;
        // 53 bits kept, the next ones 0 1 0..: down
        case DType::f64:
          EXPECT_EQ(bits, 0x3FD5555555555555u);
          break;
        // 11 bits kept, the next ones 0 1 0..: down
        case DType::f16:
          EXPECT_EQ(bits, 0x3555u);
          break;
        // 8 bits kept, the next ones 1 0 1..: up
        case DType::bf16:
          EXPECT_EQ(bits, 0x3EABu);
          break;
        default:
          break;
      }
    }
  }
}

TEST_F(MpiBackendTest, SplitIntoTwoHalves) {
  const int color = rank_ % 2;  // two interleaved halves: non-contiguous world ranks
  auto half = comm_->split(color, rank_);
  expect_interleaved_half(*half, "mpi", rank_, n_);

  for (ReduceOp op : kAllReduceOps) {
    SCOPED_TRACE(std::string(name(op)));
    const size_t count = 7;  // odd
    expect_all_reduce_in_place(*half, kInputs, DType::i64, op, count, 9000, interleaved_members(color, n_));
  }
  half->barrier();
}

// Counts past MPI's int: unsupported (a SKIP), never silently truncated. The check comes before
// any MPI call, so every rank throws alike and no buffer is touched.
TEST_F(MpiBackendTest, CountsPastIntMaxAreUnsupported) {
  const size_t too_many = static_cast<size_t>(INT_MAX) + 1;
  auto expect_unsupported = [](const char* what, auto call) { expect_error(Error::Kind::unsupported, what, call); };
  expect_unsupported("reduce_scatter",
                     [&] { comm_->reduce_scatter(nullptr, nullptr, too_many, DType::u8, ReduceOp::sum); });
  expect_unsupported("all_gather", [&] { comm_->all_gather(nullptr, nullptr, too_many, DType::u8); });
  expect_unsupported("all_to_all", [&] { comm_->all_to_all(nullptr, nullptr, too_many, DType::u8); });
  expect_unsupported("isend", [&] { comm_->isend(nullptr, too_many, DType::u8, 0); });
}

// MPI has no 8-bit float: every operation refuses fp8 (a SKIP naming the backend and the dtype)
// before any MPI call, at 0 elements too, so every rank throws alike and none waits for another.
TEST_F(MpiBackendTest, Fp8IsRefusedByEveryOperation) {
  for (DType dtype : kFp8DTypes) {
    for (size_t count : {size_t{0}, size_t{1}}) {
      SCOPED_TRACE(std::string(name(dtype)) + " count " + std::to_string(count));
      std::vector<char> in(count * static_cast<size_t>(n_) + 1), out(in.size());
      const auto refused = [&](const char* what, auto call) {
        try {
          call();
          ADD_FAILURE() << what << ": no error";
        } catch (const Error& e) {
          EXPECT_EQ(e.kind(), Error::Kind::unsupported) << what;
          EXPECT_NE(std::string(e.what()).find("backend mpi has no " + std::string(name(dtype))), std::string::npos)
              << what << ": " << e.what();
        }
      };
      refused("all_reduce", [&] { comm_->all_reduce(in.data(), out.data(), count, dtype, ReduceOp::sum); });
      refused("reduce_scatter", [&] { comm_->reduce_scatter(in.data(), out.data(), count, dtype, ReduceOp::max); });
      refused("all_gather", [&] { comm_->all_gather(in.data(), out.data(), count, dtype); });
      refused("broadcast", [&] { comm_->broadcast(in.data(), out.data(), count, dtype, 0); });
      refused("reduce", [&] { comm_->reduce(in.data(), out.data(), count, dtype, ReduceOp::min, 0); });
      refused("all_to_all", [&] { comm_->all_to_all(in.data(), out.data(), count, dtype); });
      refused("send_recv", [&] {
        comm_->send_recv(in.data(), (rank_ + 1) % n_, out.data(), (rank_ - 1 + n_) % n_, count, dtype);
      });
      refused("isend", [&] { comm_->isend(in.data(), count, dtype, rank_); });
      refused("all_reduce_async", [&] { comm_->all_reduce_async(in.data(), out.data(), count, dtype, ReduceOp::avg); });
    }
  }
  comm_->barrier();  // every rank got here: no operation was entered
}

// bytes_received counts what arrived (the status of each completed receive), not what was posted:
// a peer that sends fewer elements than the receive allows shows as fewer bytes, which is what lets
// the equivalence suite's bytes_received rows catch a short message. Sent bytes count the send.
TEST_F(MpiBackendTest, ReceivedBytesAreWhatArrived) {
  CommOptions options = test_options();
  options.observer = std::make_shared<OpObserver>();
  auto comm = make_communicator("mpi", options);
  if (n_ < 2) {
    EXPECT_EQ(options.observer->bytes_received.load(), 0);
    return;
  }
  std::vector<float> out(7, 1.0f), in(10, 0.0f);
  if (rank_ == 0) {
    comm->send(out.data(), 7, DType::f32, 1);           // into a receive posted for 10
    comm->isend(out.data(), 3, DType::f32, 1)->wait();  // into an irecv posted for 10
  } else if (rank_ == 1) {
    comm->recv(in.data(), 10, DType::f32, 0);
    EXPECT_EQ(options.observer->bytes_received.load(), 7 * 4);
    comm->irecv(in.data(), 10, DType::f32, 0)->wait();
    EXPECT_EQ(options.observer->bytes_received.load(), (7 + 3) * 4);
  }
  const int64_t before = options.observer->bytes_received.load();
  // send_recv around the ring: every rank receives one message of 5 f64.
  std::vector<double> a(5, 2.0), b(5, 0.0);
  comm->send_recv(a.data(), (rank_ + 1) % n_, b.data(), (rank_ + n_ - 1) % n_, 5, DType::f64);
  EXPECT_EQ(options.observer->bytes_received.load() - before, 5 * 8);
  if (rank_ > 1) {
    EXPECT_EQ(before, 0);
  }
  comm->barrier();
}

}  // namespace
}  // namespace dts

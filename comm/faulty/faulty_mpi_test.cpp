// Tests of the faulty(KIND,INNER) backend under mpirun (NP 1-4, see comm/CMakeLists.txt): each
// kind changes each collective's and each point-to-point transfer's result exactly as documented
// in faulty_communicator.cpp, on the victim only, so the suites' checks have a real fault to catch.
// Run: ctest -R faulty_mpi_test --output-on-failure
#include "comm/faulty/faulty_communicator.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/element.h"

namespace dts {
namespace {

enum class Collective : uint8_t {
  all_reduce,
  reduce_scatter,
  all_gather,
  broadcast,
  reduce,
  all_to_all,
  send_recv,
  all_reduce_async
};
constexpr std::array kAllCollectives{Collective::all_reduce, Collective::reduce_scatter, Collective::all_gather,
                                     Collective::broadcast,  Collective::reduce,         Collective::all_to_all,
                                     Collective::send_recv,  Collective::all_reduce_async};
enum class Placement : uint8_t { out_of_place, in_place };

std::string collective_name(Collective c) {
  switch (c) {
    case Collective::all_reduce: return "all_reduce";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::all_gather: return "all_gather";
    case Collective::broadcast: return "broadcast";
    case Collective::reduce: return "reduce";
    case Collective::all_to_all: return "all_to_all";
    case Collective::send_recv: return "send_recv";
    case Collective::all_reduce_async: return "all_reduce_async";
  }
  return "?";
}

bool is_reduction(Collective c) {
  return c == Collective::all_reduce || c == Collective::reduce_scatter || c == Collective::reduce ||
         c == Collective::all_reduce_async;
}

// 13 elements per rank (per peer): odd, so the flipped element count/2 has neighbours on both
// sides that must stay intact; small, so the whole binary runs in seconds at NP 4 on 2 cores.
constexpr size_t kCount = 13;
// broadcast and reduce use root 0 while the victim is the last rank, so with 2+ ranks the tests
// tell "the victim" from "the root" (and at NP 1 both are rank 0).
constexpr int kRoot = 0;
// Fills output a collective must not write: every input below is positive, so -1 never arrives.
constexpr int32_t kUntouched = -1;
// Offsets of the stale test's successive calls: larger than any value of one call (7 * 3 + 5 = 26
// per rank), so no output of one call can equal an output of another.
constexpr int32_t kSaltStep = 100;

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}
int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// Element i of `rank`'s input: small positive integers, so every reduction of up to 4 ranks is
// exact in every dtype (largest sum 7 * (0+1+2+3) + 4 * 5 = 62), and no contribution is zero,
// so a missing rank always changes a sum.
int32_t input_value(int rank, size_t i, int32_t salt) { return rank * 7 + static_cast<int32_t>(i % 5) + 1 + salt; }

struct Lengths {
  size_t in, out;
};
Lengths lengths(Collective c, size_t count, int n) {
  const size_t all = count * static_cast<size_t>(n);
  switch (c) {
    case Collective::reduce_scatter: return {all, count};
    case Collective::all_gather: return {count, all};
    case Collective::all_to_all: return {all, all};
    default: return {count, count};
  }
}

std::vector<int32_t> make_input(Collective c, size_t count, int n, int rank, int32_t salt) {
  std::vector<int32_t> in(lengths(c, count, n).in);
  for (size_t i = 0; i < in.size(); ++i) in[i] = input_value(rank, i, salt);
  return in;
}

int32_t identity_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::prod: return 1;
    case ReduceOp::min: return std::numeric_limits<int32_t>::max();
    case ReduceOp::max: return std::numeric_limits<int32_t>::lowest();
    default: return 0;
  }
}

int32_t combine(ReduceOp op, int32_t a, int32_t b) {
  switch (op) {
    case ReduceOp::prod: return a * b;  // at most 5 * 12 * 19 * 26 = 29640: no overflow
    case ReduceOp::min: return std::min(a, b);
    case ReduceOp::max: return std::max(a, b);
    default: return a + b;
  }
}

// What rank `me` of `n` must receive, computed on the host from the input formula. `missing`:
// the rank whose contribution is lost (it counts as the identity in reductions and as zeros
// elsewhere), or -1.
std::vector<int32_t> expected_output(Collective c, ReduceOp op, size_t count, int n, int me, int32_t salt,
                                     int missing = -1) {
  const auto contribution = [&](int rank, size_t i) { return rank == missing ? 0 : input_value(rank, i, salt); };
  const auto reduction = [&](size_t index) {
    int32_t acc = identity_of(op);
    for (int r = 0; r < n; ++r) {
      if (r != missing) acc = combine(op, acc, input_value(r, index, salt));
    }
    return op == ReduceOp::avg ? acc / n : acc;  // avg divides by all ranks, as the backends do
  };
  std::vector<int32_t> out(lengths(c, count, n).out);
  for (size_t i = 0; i < out.size(); ++i) {
    const int from = static_cast<int>(i / (count == 0 ? 1 : count));
    const size_t within = i % (count == 0 ? 1 : count);
    switch (c) {
      case Collective::all_reduce:
      case Collective::all_reduce_async:
      case Collective::reduce: out[i] = reduction(i); break;
      case Collective::reduce_scatter: out[i] = reduction(static_cast<size_t>(me) * count + i); break;
      case Collective::all_gather: out[i] = contribution(from, within); break;
      case Collective::broadcast: out[i] = contribution(kRoot, i); break;
      case Collective::all_to_all: out[i] = contribution(from, static_cast<size_t>(me) * count + within); break;
      case Collective::send_recv: out[i] = contribution((me - 1 + n) % n, i); break;
    }
  }
  return out;
}

// Runs `c` on `comm` with `in` (this rank's input) and returns the output the collective defines.
// In place follows the interface's conventions (reduce_scatter: out == in + rank * count;
// all_gather: in == out + rank * count; the others: in == out).
std::vector<int32_t> run_collective(Communicator& comm, Collective c, Placement placement, ReduceOp op,
                                    std::vector<int32_t> in, size_t count) {
  const DType i32 = DType::i32;
  const int rank = comm.rank(), n = comm.size();
  const int next = (rank + 1) % n, prev = (rank - 1 + n) % n;
  std::vector<int32_t> out(lengths(c, count, n).out, kUntouched);
  const bool in_place = placement == Placement::in_place;
  if (in_place && c == Collective::reduce_scatter) {
    int32_t* slot = in.data() + static_cast<size_t>(rank) * count;
    comm.reduce_scatter(in.data(), slot, count, i32, op);
    return {slot, slot + count};
  }
  if (in_place && c == Collective::all_gather) {
    std::copy(in.begin(), in.end(), out.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(rank) * count));
    comm.all_gather(out.data() + static_cast<size_t>(rank) * count, out.data(), count, i32);
    return out;
  }
  // The other collectives have in and out of one length: in place runs on the input buffer.
  int32_t* dst = in_place ? in.data() : out.data();
  switch (c) {
    case Collective::all_reduce: comm.all_reduce(in.data(), dst, count, i32, op); break;
    case Collective::reduce_scatter: comm.reduce_scatter(in.data(), dst, count, i32, op); break;
    case Collective::all_gather: comm.all_gather(in.data(), dst, count, i32); break;
    case Collective::broadcast: comm.broadcast(in.data(), dst, count, i32, kRoot); break;
    case Collective::reduce: comm.reduce(in.data(), dst, count, i32, op, kRoot); break;
    case Collective::all_to_all: comm.all_to_all(in.data(), dst, count, i32); break;
    case Collective::send_recv: comm.send_recv(in.data(), next, dst, prev, count, i32); break;
    case Collective::all_reduce_async: comm.all_reduce_async(in.data(), dst, count, i32, op)->wait(); break;
  }
  return in_place ? in : out;
}

std::unique_ptr<Communicator> make_faulty(const std::string& kind, const CommOptions& options = {}) {
  return make_communicator("faulty(" + kind + ",mpi)", options);
}

int victim_of(const Communicator& comm) { return dynamic_cast<const FaultyCommunicator&>(comm).victim(); }


// Catches what make_communicator throws; every rank throws alike, so no rank is left waiting.
Error::Kind error_kind_of(const std::string& spec, const CommOptions& options = {}, std::string* message = nullptr) {
  try {
    make_communicator(spec, options);
  } catch (const Error& error) {
    if (message) *message = error.what();
    return error.kind();
  }
  ADD_FAILURE() << spec << " did not throw";
  return Error::Kind::io;
}

// ---------------------------------------------------------------------------------------------
// Spec parsing and what the wrapper reports about itself.

TEST(FaultySpec, UnknownKindListsTheKinds) {
  std::string message;
  EXPECT_EQ(error_kind_of("faulty(nope,mpi)", {}, &message), Error::Kind::invalid_argument);
  EXPECT_NE(message.find("nope"), std::string::npos) << message;
  for (const char* kind : {"bitflip", "drop", "stale", "hang", "delay(MS)"}) {
    EXPECT_NE(message.find(kind), std::string::npos) << message;
  }
}

TEST(FaultySpec, NeedsExactlyTwoArguments) {
  std::string message;
  EXPECT_EQ(error_kind_of("faulty(bitflip)", {}, &message), Error::Kind::invalid_argument);
  EXPECT_NE(message.find("faulty(KIND,INNER)"), std::string::npos) << message;
  EXPECT_EQ(error_kind_of("faulty"), Error::Kind::invalid_argument);
  EXPECT_EQ(error_kind_of("faulty(bitflip,mpi,mpi)"), Error::Kind::invalid_argument);
}

TEST(FaultySpec, BadDelayAndBadInnerAreInvalid) {
  for (const char* spec : {"faulty(delay(),mpi)", "faulty(delay(x),mpi)", "faulty(delay(-5),mpi)",
                           "faulty(delay(5ms),mpi)", "faulty(bitflip(1),mpi)", "faulty(bitflip,nope)"}) {
    EXPECT_EQ(error_kind_of(spec), Error::Kind::invalid_argument) << spec;
  }
}

TEST(FaultySpec, NameRoundTripsAndPropertiesComeFromInner) {
  auto plain = make_communicator("mpi");
  for (const char* spec : {"faulty(bitflip,mpi)", "faulty(drop,mpi)", "faulty(stale,mpi)", "faulty(hang,mpi)",
                           "faulty(delay,mpi)", "faulty(delay(5),mpi)", "faulty(saturate,mpi)", "faulty(dropnan,mpi)"}) {
    auto faulty = make_communicator(spec);
    EXPECT_EQ(faulty->backend(), spec);
    EXPECT_EQ(faulty->version(), plain->version());
    EXPECT_EQ(faulty->rank(), world_rank());
    EXPECT_EQ(faulty->size(), world_size());
    EXPECT_EQ(faulty->memory(), Memory::host);
    // The default victim is the last rank: rank 0 itself at NP 1.
    EXPECT_EQ(victim_of(*faulty), world_size() - 1) << spec;
  }
  // "delay" alone is a 50 ms straggler (the documented default).
  auto delay = make_communicator("faulty(delay,mpi)");
  EXPECT_EQ(dynamic_cast<FaultyCommunicator&>(*delay).fault().delay, std::chrono::milliseconds(50));
}

TEST(FaultySpec, FaultRankOptionChoosesTheVictim) {
  const int rank = world_rank(), n = world_size();
  CommOptions options;
  options.fault_rank = 0;
  auto faulty = make_faulty("bitflip", options);
  EXPECT_EQ(victim_of(*faulty), 0);
  const auto in = make_input(Collective::all_reduce, kCount, n, rank, 0);
  const auto got = run_collective(*faulty, Collective::all_reduce, Placement::out_of_place, ReduceOp::sum, in, kCount);
  auto expected = expected_output(Collective::all_reduce, ReduceOp::sum, kCount, n, rank, 0);
  if (rank == 0) expected[kCount / 2] ^= 1;
  EXPECT_EQ(got, expected);

  options.fault_rank = n;  // one past the last rank
  EXPECT_EQ(error_kind_of("faulty(bitflip,mpi)", options), Error::Kind::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// bitflip, drop and stale on every collective, out of place and in place.

class FaultyCollectiveTest : public testing::TestWithParam<std::tuple<Collective, Placement>> {};

TEST_P(FaultyCollectiveTest, BitflipFlipsBitZeroOfTheMiddleElementOnTheVictim) {
  const auto [c, placement] = GetParam();
  auto plain = make_communicator("mpi");
  auto faulty = make_faulty("bitflip");
  const int rank = plain->rank(), n = plain->size();
  const auto in = make_input(c, kCount, n, rank, 0);
  const auto reference = run_collective(*plain, c, placement, ReduceOp::sum, in, kCount);
  const auto got = run_collective(*faulty, c, placement, ReduceOp::sum, in, kCount);
  // reduce defines the root's output only, so the fault lands on the root.
  const int corrupted = c == Collective::reduce ? kRoot : n - 1;
  if (c == Collective::reduce && rank != kRoot) return;
  EXPECT_EQ(reference, expected_output(c, ReduceOp::sum, kCount, n, rank, 0));  // the model agrees with MPI
  ASSERT_EQ(got.size(), reference.size());
  const size_t flipped = rank == corrupted ? got.size() / 2 : got.size();  // got.size(): none
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i] ^ reference[i], i == flipped ? 1 : 0) << "element " << i << " of " << got.size();
  }
}

TEST_P(FaultyCollectiveTest, DropLeavesOutTheVictimsContribution) {
  const auto [c, placement] = GetParam();
  auto plain = make_communicator("mpi");
  auto faulty = make_faulty("drop");
  const int rank = plain->rank(), n = plain->size();
  const int victim = n - 1;
  const auto in = make_input(c, kCount, n, rank, 0);
  const auto reference = run_collective(*plain, c, placement, ReduceOp::sum, in, kCount);
  const auto got = run_collective(*faulty, c, placement, ReduceOp::sum, in, kCount);
  if (c == Collective::reduce && rank != kRoot) return;
  EXPECT_EQ(reference, expected_output(c, ReduceOp::sum, kCount, n, rank, 0));
  if (c == Collective::broadcast && rank == victim && victim != kRoot) {
    // A receiving victim never gets the data: its buffer keeps what it held before the call.
    EXPECT_EQ(got, placement == Placement::in_place ? in : std::vector<int32_t>(kCount, kUntouched));
    return;
  }
  // Reductions: as if the victim had contributed the identity; the others: its data are zeros.
  EXPECT_EQ(got, expected_output(c, ReduceOp::sum, kCount, n, rank, 0, victim));
  // Every input is positive, so a reduction without the victim is visibly wrong on every rank.
  if (is_reduction(c)) {
    EXPECT_NE(got, reference);
  }
}

TEST_P(FaultyCollectiveTest, StaleReturnsThePreviousCallsResultOnTheVictim) {
  const auto [c, placement] = GetParam();
  auto faulty = make_faulty("stale");
  const int rank = faulty->rank(), n = faulty->size();
  const int stale_rank = c == Collective::reduce ? kRoot : n - 1;  // reduce: the root, as bitflip
  // Three calls with different inputs: the 2nd returns the 1st's result, the 3rd the 2nd's.
  for (int call = 0; call < 3; ++call) {
    const int32_t salt = call * kSaltStep;
    const auto got =
        run_collective(*faulty, c, placement, ReduceOp::sum, make_input(c, kCount, n, rank, salt), kCount);
    if (c == Collective::reduce && rank != kRoot) continue;
    // The first call has no previous result to return.
    const int32_t returned_salt = rank == stale_rank && call > 0 ? salt - kSaltStep : salt;
    EXPECT_EQ(got, expected_output(c, ReduceOp::sum, kCount, n, rank, returned_salt)) << "call " << call;
  }
}

std::string collective_case_name(const testing::TestParamInfo<std::tuple<Collective, Placement>>& info) {
  const auto [c, placement] = info.param;
  return collective_name(c) + (placement == Placement::in_place ? "_in_place" : "_out_of_place");
}

INSTANTIATE_TEST_SUITE_P(AllCollectives, FaultyCollectiveTest,
                         testing::Combine(testing::ValuesIn(kAllCollectives),
                                          testing::Values(Placement::out_of_place, Placement::in_place)),
                         collective_case_name);

// ---------------------------------------------------------------------------------------------
// hang: the victim's call must not return until release_hangs().

// On the hang victim: runs `call` on a second thread and shows that it stays blocked in the hang
// until release_hangs(), then returns its result. `what` names the call in failures.
std::vector<int32_t> run_while_hung(const std::function<std::vector<int32_t>()>& call, const std::string& what) {
  std::vector<int32_t> got;
  std::atomic<bool> returned{false};
  std::string error;
  std::thread caller([&] {
    try {
      got = call();
    } catch (const std::exception& e) {
      error = e.what();
    }
    returned = true;
  });
  // Until the call is really blocked in the hang: starting a thread on an oversubscribed machine
  // takes milliseconds; 10 s is far past that, and only spent when the test fails.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (FaultyCommunicator::hanging_calls() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(FaultyCommunicator::hanging_calls(), 1);
  // 200 ms: 20 of the hang's 10 ms polls, and thousands of times what the call needs.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(returned.load()) << what << " returned while hung";
  // Released until it returns, so a call that began late (or a second call that hangs anew) is
  // not left hanging the test.
  while (!returned.load()) {
    FaultyCommunicator::release_hangs();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  caller.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(FaultyCommunicator::hanging_calls(), 0);
  return got;
}

// The victim's call runs on a second thread while the main thread waits (never both in MPI).
bool mpi_allows_a_second_thread() {
  int thread_level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&thread_level);
  return thread_level >= MPI_THREAD_SERIALIZED;
}

class FaultyHangTest : public testing::TestWithParam<Collective> {};

TEST_P(FaultyHangTest, VictimBlocksUntilReleasedThenAllComplete) {
  if (!mpi_allows_a_second_thread()) GTEST_SKIP() << "MPI without MPI_THREAD_SERIALIZED";
  const Collective c = GetParam();
  auto faulty = make_faulty("hang");
  const int rank = faulty->rank(), n = faulty->size();
  const auto in = make_input(c, kCount, n, rank, 0);
  const auto call = [&] { return run_collective(*faulty, c, Placement::out_of_place, ReduceOp::sum, in, kCount); };
  // Peers call normally and wait inside MPI for the victim.
  const auto got = rank == n - 1 ? run_while_hung(call, collective_name(c)) : call();
  if (c == Collective::reduce && rank != kRoot) return;
  EXPECT_EQ(got, expected_output(c, ReduceOp::sum, kCount, n, rank, 0));
}

std::string hang_case_name(const testing::TestParamInfo<Collective>& info) { return collective_name(info.param); }

INSTANTIATE_TEST_SUITE_P(AllCollectives, FaultyHangTest, testing::ValuesIn(kAllCollectives), hang_case_name);

// ---------------------------------------------------------------------------------------------
// Details of single kinds.

TEST(FaultyBitflip, EveryDTypeDiffersInBitZeroOfOneElement) {
  auto plain = make_communicator("mpi");
  auto faulty = make_faulty("bitflip");
  const int rank = plain->rank(), n = plain->size();
  for (const DType dtype : kAllDTypes) {
    const size_t width = size_of(dtype);
    std::vector<std::byte> in(kCount * width), reference(in.size()), got(in.size());
    for (size_t i = 0; i < kCount; ++i) store_double(dtype, in.data(), i, input_value(rank, i, 0));
    plain->all_reduce(in.data(), reference.data(), kCount, dtype, ReduceOp::sum);
    faulty->all_reduce(in.data(), got.data(), kCount, dtype, ReduceOp::sum);
    // Bit 0 of an element is in its lowest-addressed byte on little-endian hosts.
    const size_t lowest_byte = std::endian::native == std::endian::little ? 0 : width - 1;
    for (size_t i = 0; i < kCount; ++i) {
      for (size_t b = 0; b < width; ++b) {
        const bool flipped = rank == n - 1 && i == kCount / 2 && b == lowest_byte;
        EXPECT_EQ(std::to_integer<int>(got[i * width + b] ^ reference[i * width + b]), flipped ? 1 : 0)
            << name(dtype) << " element " << i << " byte " << b;
      }
    }
  }
}

TEST(FaultyBitflip, EmptyOutputIsLeftAlone) {
  auto faulty = make_faulty("bitflip");
  // Storage for one element, a count of zero: element count/2 = 0 exists in memory but is not
  // part of the output, so it must keep its value.
  std::array<int32_t, 1> in{5}, out{kUntouched};
  faulty->all_reduce(in.data(), out.data(), 0, DType::i32, ReduceOp::sum);
  EXPECT_EQ(out[0], kUntouched);
}

TEST(FaultyDrop, EveryReduceOpContributesItsIdentity) {
  auto faulty = make_faulty("drop");
  const int rank = faulty->rank(), n = faulty->size();
  const auto in = make_input(Collective::all_reduce, kCount, n, rank, 0);
  for (const ReduceOp op : kAllReduceOps) {
    for (const Placement placement : {Placement::out_of_place, Placement::in_place}) {
      // At NP 1 nothing is left: the result is the identity itself (0, 1, INT32_MAX, INT32_MIN).
      EXPECT_EQ(run_collective(*faulty, Collective::all_reduce, placement, op, in, kCount),
                expected_output(Collective::all_reduce, op, kCount, n, rank, 0, n - 1))
          << name(op) << (placement == Placement::in_place ? " in place" : " out of place");
    }
  }
}

TEST(FaultyStale, SizeChangeIsNotCorruptedAndOpsAreRememberedApart) {
  auto faulty = make_faulty("stale");
  const int rank = faulty->rank(), n = faulty->size();
  const bool victim = rank == n - 1;
  const auto all_reduce = [&](size_t count, int32_t salt) {
    return run_collective(*faulty, Collective::all_reduce, Placement::out_of_place, ReduceOp::sum,
                          make_input(Collective::all_reduce, count, n, rank, salt), count);
  };
  const auto expected = [&](size_t count, int32_t salt) {
    return expected_output(Collective::all_reduce, ReduceOp::sum, count, n, rank, salt);
  };
  // 13 then 7 elements: the second call's byte size has no previous output, so it is correct.
  constexpr size_t kSmaller = 7;
  EXPECT_EQ(all_reduce(kCount, 0), expected(kCount, 0));
  EXPECT_EQ(all_reduce(kSmaller, kSaltStep), expected(kSmaller, kSaltStep));
  // A broadcast in between has its own memory and does not disturb all_reduce's.
  run_collective(*faulty, Collective::broadcast, Placement::out_of_place, ReduceOp::sum,
                 make_input(Collective::broadcast, kSmaller, n, rank, 5 * kSaltStep), kSmaller);
  EXPECT_EQ(all_reduce(kSmaller, 2 * kSaltStep), expected(kSmaller, victim ? kSaltStep : 2 * kSaltStep));
}

TEST(FaultyDelay, VictimIsLateAndResultsAreRight) {
  // 30 ms: far above an MPI all_reduce of 13 elements, short enough to keep the test quick.
  constexpr auto kDelay = std::chrono::milliseconds(30);
  auto faulty = make_communicator("faulty(delay(30),mpi)");
  const int rank = faulty->rank(), n = faulty->size();
  for (const Collective c : kAllCollectives) {
    const auto start = std::chrono::steady_clock::now();
    const auto got = run_collective(*faulty, c, Placement::out_of_place, ReduceOp::sum,
                                    make_input(c, kCount, n, rank, 0), kCount);
    const auto elapsed = std::chrono::steady_clock::now() - start;
    if (rank == n - 1) {
      EXPECT_GE(elapsed, kDelay) << collective_name(c);
    }
    if (c == Collective::reduce && rank != kRoot) continue;
    EXPECT_EQ(got, expected_output(c, ReduceOp::sum, kCount, n, rank, 0)) << collective_name(c);
  }
}

TEST(FaultyBarrier, PassesThroughEvenForHang) {
  // A barrier carries no data, and the hang kind leaves it alone: every rank gets through.
  for (const char* kind : {"bitflip", "drop", "stale", "hang", "delay(0)", "saturate", "dropnan"}) {
    make_faulty(kind)->barrier();
  }
}

TEST(FaultyAbort, EveryRankThrowsTogetherAndOnlyTheVictimIsAborted) {
  // Every rank throws at the same armed call, so none is left waiting inside INNER for another;
  // only the victim's communicator refuses later calls, so the harness must ask every rank.
  FaultyCommunicator::rearm_abort();
  CommOptions options;
  options.fault_after_calls = 2;  // two clean collectives first: the abort strikes mid-run
  auto faulty = make_faulty("abort", options);
  int32_t value = 1;
  for (int i = 0; i < 2; ++i) faulty->all_reduce(&value, &value, 1, DType::i32, ReduceOp::sum);
  EXPECT_THROW(faulty->all_reduce(&value, &value, 1, DType::i32, ReduceOp::sum), Error);
  const int victim = world_size() - 1;  // fault_rank -1: the last rank
  EXPECT_EQ(faulty->aborted(), faulty->rank() == victim);
  // What the harness does next on every rank: give it up, then make a new one, which runs clean.
  faulty->abort();
  EXPECT_TRUE(faulty->aborted());
  faulty.reset();
  auto renewed = make_faulty("abort", options);
  for (int i = 0; i < 4; ++i) renewed->all_reduce(&value, &value, 1, DType::i32, ReduceOp::sum);
  EXPECT_FALSE(renewed->aborted());
  FaultyCommunicator::rearm_abort();
}

// ---------------------------------------------------------------------------------------------
// saturate and dropnan: the victim's reductions follow other arithmetic; its data does not change.

// What 100 from every rank sums to in i8 under the stated semantics: 100n modulo 256.
int8_t wrapped_i8_sum(int n) { return static_cast<int8_t>(static_cast<uint8_t>(100 * n)); }

TEST(FaultySaturate, TheVictimsSumsAndProductsClampWhereTheyOverflow) {
  auto faulty = make_faulty("saturate");
  const int rank = faulty->rank(), n = faulty->size();
  const bool clamps = rank == n - 1 && n > 1;  // the victim, when 2 ranks or more overflow
  const int8_t hundred = 100;  // 2 ranks' 200 is past i8's 127
  for (const bool in_place : {false, true}) {
    int8_t out = in_place ? hundred : 0;
    faulty->all_reduce(in_place ? &out : &hundred, &out, 1, DType::i8, ReduceOp::sum);
    EXPECT_EQ(out, clamps ? 127 : wrapped_i8_sum(n)) << (in_place ? "in place" : "out of place");
  }
  // 2^16 from every rank: the product 2^(16n) wraps to 0 in i32 from 2 ranks on.
  const int32_t two16 = 1 << 16;
  int32_t product = 0;
  faulty->all_reduce(&two16, &product, 1, DType::i32, ReduceOp::prod);
  EXPECT_EQ(product, clamps ? std::numeric_limits<int32_t>::max() : (n == 1 ? two16 : 0));
  // Half the largest f32 from every rank: 3 ranks overflow to +inf, which the victim clamps.
  const float half = std::numeric_limits<float>::max() / 2;
  float sum = 0;
  faulty->all_reduce(&half, &sum, 1, DType::f32, ReduceOp::sum);
  if (n >= 3) {
    EXPECT_EQ(sum, clamps ? std::numeric_limits<float>::max() : std::numeric_limits<float>::infinity());
  }
  // reduce_scatter: each rank's own block; reduce: the root's result.
  const std::vector<int8_t> blocks(static_cast<size_t>(n), hundred);
  int8_t block = 0;
  faulty->reduce_scatter(blocks.data(), &block, 1, DType::i8, ReduceOp::sum);
  EXPECT_EQ(block, clamps ? 127 : wrapped_i8_sum(n));
  int8_t reduced = 0;
  faulty->reduce(&hundred, &reduced, 1, DType::i8, ReduceOp::sum, 0);
  if (rank == 0) {
    EXPECT_EQ(reduced, n > 1 ? 127 : 100);
  }
}

TEST(FaultyDropnan, TheVictimsMinAndMaxIgnoreNaN) {
  auto faulty = make_faulty("dropnan");
  const int rank = faulty->rank(), n = faulty->size();
  const bool victim = rank == n - 1;
  // Rank 0 holds NaN, rank r > 0 holds 1 + r: without the NaN, max is n and min 2.
  const float in = rank == 0 ? std::numeric_limits<float>::quiet_NaN() : 1.0f + static_cast<float>(rank);
  float max = 0, min = 0, sum = 0;
  faulty->all_reduce(&in, &max, 1, DType::f32, ReduceOp::max);
  faulty->all_reduce(&in, &min, 1, DType::f32, ReduceOp::min);
  faulty->all_reduce(&in, &sum, 1, DType::f32, ReduceOp::sum);
  if (!victim) return;  // the others get what INNER gives
  if (n == 1) {
    EXPECT_TRUE(std::isnan(max));  // the NaN alone: nothing to drop it for
  } else {
    EXPECT_EQ(max, static_cast<float>(n));
    EXPECT_EQ(min, 2.0f);
  }
  EXPECT_TRUE(std::isnan(sum));  // sums keep the stated arithmetic
}

// Neither kind touches data movement or point-to-point calls: a ring over them does its own
// arithmetic (core/reduce.h) and gives the stated result everywhere.
TEST(FaultySemantics, DataMovementAndRingsOverThemAreUntouched) {
  for (const std::string kind : {"saturate", "dropnan"}) {
    auto faulty = make_faulty(kind);
    const int n = faulty->size();
    const int8_t hundred = 100;
    std::vector<int8_t> gathered(static_cast<size_t>(n));
    faulty->all_gather(&hundred, gathered.data(), 1, DType::i8);
    EXPECT_EQ(gathered, std::vector<int8_t>(static_cast<size_t>(n), hundred)) << kind;
    auto ring = make_communicator("ring(faulty(" + kind + ",mpi))");
    int8_t sum = 0;
    ring->all_reduce(&hundred, &sum, 1, DType::i8, ReduceOp::sum);
    EXPECT_EQ(sum, wrapped_i8_sum(n)) << kind;
  }
}

// ---------------------------------------------------------------------------------------------
// Point to point: each rank passes its input to the next rank and receives the previous rank's,
// so the victim (the last rank) both sends (to rank 0) and receives (from rank n-2).

// How the pass is made; each shape works at every NP (1 included: a rank passes to itself)
// without relying on MPI buffering, because a blocking call always meets a non-blocking one.
enum class Transfer : uint8_t {
  send_irecv,  // irecv posted, then a blocking send, then wait(): faults of send and irecv
  isend_recv,  // isend, then a blocking recv, then wait(): faults of isend and recv
  polled,      // irecv and isend, the irecv completed through test(): the other completion path
};
constexpr std::array kAllTransfers{Transfer::send_irecv, Transfer::isend_recv, Transfer::polled};

std::string transfer_name(Transfer t) {
  switch (t) {
    case Transfer::send_irecv: return "send_irecv";
    case Transfer::isend_recv: return "isend_recv";
    case Transfer::polled: return "polled";
  }
  return "?";
}

// Bounds the polled transfer, so a lost message fails the test instead of hanging ctest.
constexpr auto kPollLimit = std::chrono::seconds(60);

// Sends `in` to the next rank and returns what arrived from the previous one.
std::vector<int32_t> pass_to_next(Communicator& comm, Transfer t, const std::vector<int32_t>& in) {
  const int rank = comm.rank(), n = comm.size();
  const int next = (rank + 1) % n, prev = (rank - 1 + n) % n;
  const size_t count = in.size();
  std::vector<int32_t> out(count, kUntouched);
  switch (t) {
    case Transfer::send_irecv: {
      auto receiving = comm.irecv(out.data(), count, DType::i32, prev);
      comm.send(in.data(), count, DType::i32, next);
      receiving->wait();
      break;
    }
    case Transfer::isend_recv: {
      auto sending = comm.isend(in.data(), count, DType::i32, next);
      comm.recv(out.data(), count, DType::i32, prev);
      sending->wait();
      break;
    }
    case Transfer::polled: {
      auto receiving = comm.irecv(out.data(), count, DType::i32, prev);
      auto sending = comm.isend(in.data(), count, DType::i32, next);
      const auto deadline = std::chrono::steady_clock::now() + kPollLimit;
      while (!receiving->test()) {
        if (std::chrono::steady_clock::now() > deadline) {
          ADD_FAILURE() << "irecv not complete after " << kPollLimit.count() << " s";
          break;
        }
        std::this_thread::yield();
      }
      sending->wait();
      break;
    }
  }
  return out;
}

// What a clean pass gives this rank: the previous rank's input.
std::vector<int32_t> passed_from_previous(const Communicator& comm, int32_t salt) {
  const int n = comm.size();
  return make_input(Collective::send_recv, kCount, n, (comm.rank() - 1 + n) % n, salt);
}

class FaultyPointToPointTest : public testing::TestWithParam<Transfer> {};

TEST_P(FaultyPointToPointTest, BitflipFlipsBitZeroOfTheMiddleElementTheVictimReceives) {
  auto faulty = make_faulty("bitflip");
  const int rank = faulty->rank(), n = faulty->size();
  const auto in = make_input(Collective::send_recv, kCount, n, rank, 0);
  const auto got = pass_to_next(*faulty, GetParam(), in);
  auto expected = passed_from_previous(*faulty, 0);
  if (rank == n - 1) expected[kCount / 2] ^= 1;  // the receiver is hit, never the sender
  EXPECT_EQ(got, expected);
}

TEST_P(FaultyPointToPointTest, DropMakesTheVictimSendZeros) {
  auto faulty = make_faulty("drop");
  const int rank = faulty->rank(), n = faulty->size();
  const auto got = pass_to_next(*faulty, GetParam(), make_input(Collective::send_recv, kCount, n, rank, 0));
  // Rank 0 receives from the victim (the last rank); every input is positive, so zeros are wrong.
  const bool from_victim = (rank - 1 + n) % n == n - 1;
  EXPECT_EQ(got, from_victim ? std::vector<int32_t>(kCount, 0) : passed_from_previous(*faulty, 0));
}

TEST_P(FaultyPointToPointTest, StaleGivesTheVictimThePreviousReceive) {
  auto faulty = make_faulty("stale");
  const int rank = faulty->rank(), n = faulty->size();
  // Three passes with different inputs: the victim's 2nd receive is the 1st's data, the 3rd the 2nd's.
  for (int call = 0; call < 3; ++call) {
    const int32_t salt = call * kSaltStep;
    const auto got = pass_to_next(*faulty, GetParam(), make_input(Collective::send_recv, kCount, n, rank, salt));
    const int32_t returned_salt = rank == n - 1 && call > 0 ? salt - kSaltStep : salt;
    EXPECT_EQ(got, passed_from_previous(*faulty, returned_salt)) << "call " << call;
  }
}

TEST_P(FaultyPointToPointTest, DelayMakesTheVictimLateAndChangesNoData) {
  // 30 ms: far above an MPI message of 13 elements, short enough to keep the test quick.
  constexpr auto kDelay = std::chrono::milliseconds(30);
  auto faulty = make_communicator("faulty(delay(30),mpi)");
  const int rank = faulty->rank(), n = faulty->size();
  const auto start = std::chrono::steady_clock::now();
  const auto got = pass_to_next(*faulty, GetParam(), make_input(Collective::send_recv, kCount, n, rank, 0));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  // Two point-to-point calls on the victim, each delayed.
  if (rank == n - 1) {
    EXPECT_GE(elapsed, 2 * kDelay);
  }
  EXPECT_EQ(got, passed_from_previous(*faulty, 0));
}

TEST_P(FaultyPointToPointTest, HangBlocksTheVictimUntilReleased) {
  if (!mpi_allows_a_second_thread()) GTEST_SKIP() << "MPI without MPI_THREAD_SERIALIZED";
  auto faulty = make_faulty("hang");
  const int rank = faulty->rank(), n = faulty->size();
  const auto in = make_input(Collective::send_recv, kCount, n, rank, 0);
  const auto call = [&] { return pass_to_next(*faulty, GetParam(), in); };
  const auto got = rank == n - 1 ? run_while_hung(call, transfer_name(GetParam())) : call();
  EXPECT_EQ(got, passed_from_previous(*faulty, 0));
}

std::string transfer_case_name(const testing::TestParamInfo<Transfer>& info) { return transfer_name(info.param); }

INSTANTIATE_TEST_SUITE_P(AllTransfers, FaultyPointToPointTest, testing::ValuesIn(kAllTransfers), transfer_case_name);

TEST(FaultyPointToPoint, ArmingCountsPointToPointCallsApartFromCollectives) {
  // Two calls run clean on each count: the collectives' count and the victim's point-to-point count.
  constexpr int64_t kCleanCalls = 2;
  CommOptions options;
  options.fault_after_calls = kCleanCalls;
  auto faulty = make_faulty("bitflip", options);
  const int rank = faulty->rank(), n = faulty->size();
  const bool victim = rank == n - 1;
  const auto in = make_input(Collective::send_recv, kCount, n, rank, 0);
  // isend_recv: two point-to-point calls per pass (isend, recv), so pass 1 is calls 1-2 (clean)
  // and pass 2 is calls 3-4: its recv is armed.
  for (int pass = 1; pass <= 2; ++pass) {
    auto expected = passed_from_previous(*faulty, 0);
    if (victim && pass == 2) expected[kCount / 2] ^= 1;
    EXPECT_EQ(pass_to_next(*faulty, Transfer::isend_recv, in), expected) << "pass " << pass;
  }
  // The four point-to-point calls did not advance the collectives' count: all_reduce 1 and 2 are
  // clean, the 3rd is armed, at the same call on every rank.
  for (int call = 1; call <= 3; ++call) {
    const auto got = run_collective(*faulty, Collective::all_reduce, Placement::out_of_place, ReduceOp::sum,
                                    make_input(Collective::all_reduce, kCount, n, rank, 0), kCount);
    auto expected = expected_output(Collective::all_reduce, ReduceOp::sum, kCount, n, rank, 0);
    if (victim && call == 3) expected[kCount / 2] ^= 1;
    EXPECT_EQ(got, expected) << "all_reduce " << call;
  }
}

// ring(faulty(KIND,mpi)): the ring is built on faulty's isend/irecv, so the point-to-point faults
// must break its all_reduce (before they reached point to point, every case passed).
class FaultsUnderRingTest : public testing::TestWithParam<std::string> {};

TEST_P(FaultsUnderRingTest, AllReduceIsWrong) {
  if (world_size() < 2) GTEST_SKIP() << "a ring of one rank sends nothing";
  auto ring = make_communicator("ring(faulty(" + GetParam() + ",mpi))");
  const int rank = ring->rank(), n = ring->size();
  // Two calls with different inputs: stale needs a previous receive of the same size, which the
  // first call's transfers (of unequal segments) may not give it.
  int wrong = 0;
  for (int call = 0; call < 2; ++call) {
    const int32_t salt = call * kSaltStep;
    const auto got = run_collective(*ring, Collective::all_reduce, Placement::out_of_place, ReduceOp::sum,
                                    make_input(Collective::all_reduce, kCount, n, rank, salt), kCount);
    wrong = got != expected_output(Collective::all_reduce, ReduceOp::sum, kCount, n, rank, salt) ? 1 : wrong;
  }
  // Some rank must see a wrong result (which ones depends on where in the ring the fault lands).
  int any_wrong = 0;
  MPI_Allreduce(&wrong, &any_wrong, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(any_wrong, 1) << "ring(faulty(" << GetParam() << ",mpi)) gave the right all_reduce";
}

INSTANTIATE_TEST_SUITE_P(DataKinds, FaultsUnderRingTest, testing::Values("bitflip", "drop", "stale"));

// ---------------------------------------------------------------------------------------------
// split(): fault_rank is a rank of the job (the communicator faulty(...) was made on). In every
// group split from it, the victim is that same process, and a group without it has none.

// How a test splits the world: the color of each world rank (the key is always the world rank,
// so a group's ranks are its members in world order).
enum class Grouping : uint8_t {
  parity,              // world % 2: {0,2}, {1,3} at NP 4; {0,2}, {1} at NP 3
  halves,              // world / 2: {0,1}, {2,3} at NP 4; {0,1}, {2} at NP 3
  parity_then_halves,  // a group of a group: parity, then each parity group split by world / 2
};
constexpr std::array kAllGroupings{Grouping::parity, Grouping::halves, Grouping::parity_then_halves};

std::string grouping_name(Grouping g) {
  switch (g) {
    case Grouping::parity: return "parity";
    case Grouping::halves: return "halves";
    case Grouping::parity_then_halves: return "parity_then_halves";
  }
  return "?";
}

bool same_group(Grouping g, int a, int b) {
  const bool parity = a % 2 == b % 2, halves = a / 2 == b / 2;
  switch (g) {
    case Grouping::parity: return parity;
    case Grouping::halves: return halves;
    case Grouping::parity_then_halves: return parity && halves;
  }
  return false;
}

// This rank's group of `faulty`, split as `g` says (collective over the world).
std::unique_ptr<Communicator> split_world(Communicator& faulty, Grouping g) {
  const int world = world_rank();
  switch (g) {
    case Grouping::parity: return faulty.split(world % 2, world);
    case Grouping::halves: return faulty.split(world / 2, world);
    case Grouping::parity_then_halves: {
      auto parity = faulty.split(world % 2, world);
      return parity->split(world / 2, world);
    }
  }
  return nullptr;
}

// The group rank of world rank `process` in this rank's group, computed from the grouping alone
// (members in world order), or -1 when it is not a member.
int group_rank_of(Grouping g, int process) {
  const int world = world_rank();
  if (!same_group(g, world, process)) return -1;
  int below = 0;
  for (int r = 0; r < process; ++r) below += same_group(g, world, r) ? 1 : 0;
  return below;
}

// The job's victim for a fault_rank option: -1 is the job's last rank.
int job_victim(int fault_rank) { return fault_rank < 0 ? world_size() - 1 : fault_rank; }

// fault_rank -1 (the job's last rank) and 1 (neither first nor last at NP 3 and 4, and not the
// last rank of the parity or halves groups there: the old per-group reading missed it).
constexpr std::array kFaultRanks{-1, 1};

class FaultySplitTest : public testing::TestWithParam<std::tuple<int, Grouping>> {
 protected:
  void SetUp() override {
    if (job_victim(fault_rank()) >= world_size()) GTEST_SKIP() << "fault_rank " << fault_rank() << " needs more ranks";
  }
  int fault_rank() const { return std::get<0>(GetParam()); }
  Grouping grouping() const { return std::get<1>(GetParam()); }
  std::unique_ptr<Communicator> make_group(const std::string& kind) {
    CommOptions options;
    options.fault_rank = fault_rank();
    auto faulty = make_faulty(kind, options);
    auto group = split_world(*faulty, grouping());
    EXPECT_NE(group, nullptr);
    return group;
  }
};

TEST_P(FaultySplitTest, VictimIsTheJobsFaultRankProcess) {
  auto group = make_group("bitflip");
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->backend(), "faulty(bitflip,mpi)");
  const int expected = group_rank_of(grouping(), job_victim(fault_rank()));
  EXPECT_EQ(victim_of(*group), expected) << "world rank " << world_rank();
  // Exactly the job's victim process calls itself the victim, in whichever group it is.
  const bool me = victim_of(*group) == group->rank();
  EXPECT_EQ(me, world_rank() == job_victim(fault_rank())) << "world rank " << world_rank();
}

TEST_P(FaultySplitTest, DropLosesTheVictimOnlyInItsGroup) {
  auto group = make_group("drop");
  ASSERT_NE(group, nullptr);
  const int rank = group->rank(), n = group->size();
  const int victim = group_rank_of(grouping(), job_victim(fault_rank()));
  const auto got = run_collective(*group, Collective::all_reduce, Placement::out_of_place, ReduceOp::sum,
                                  make_input(Collective::all_reduce, kCount, n, rank, 0), kCount);
  // In the victim's group every rank sees the sum without it (its contribution is the identity);
  // every input is positive, so that sum differs from the clean one. Other groups are clean.
  EXPECT_EQ(got, expected_output(Collective::all_reduce, ReduceOp::sum, kCount, n, rank, 0, victim))
      << "world rank " << world_rank() << ", group victim " << victim;
}

std::string split_case_name(const testing::TestParamInfo<std::tuple<int, Grouping>>& info) {
  const int fault_rank = std::get<0>(info.param);
  return (fault_rank < 0 ? std::string("last") : "rank" + std::to_string(fault_rank)) + "_" +
         grouping_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(FaultRanksAndGroupings, FaultySplitTest,
                         testing::Combine(testing::ValuesIn(kFaultRanks), testing::ValuesIn(kAllGroupings)),
                         split_case_name);

TEST(FaultySplit, GroupWithoutTheVictimIsCleanForEveryDataKindAndCollective) {
  // The job's last rank is the victim; the parity group without it (at NP 2 and up) must give
  // every collective's exact result, reduce's root included, for every kind that touches data.
  for (const char* kind : {"bitflip", "drop", "stale"}) {
    auto faulty = make_faulty(kind);
    auto group = split_world(*faulty, Grouping::parity);
    ASSERT_NE(group, nullptr);
    const int rank = group->rank(), n = group->size();
    const bool clean = victim_of(*group) < 0;
    EXPECT_EQ(clean, group_rank_of(Grouping::parity, world_size() - 1) < 0);
    for (const Collective c : kAllCollectives) {
      // Two calls with different inputs: stale would return the first call's result in the second.
      for (int32_t salt : {0, kSaltStep}) {
        const auto got = run_collective(*group, c, Placement::out_of_place, ReduceOp::sum,
                                        make_input(c, kCount, n, rank, salt), kCount);
        if (!clean || (c == Collective::reduce && rank != kRoot)) continue;  // reduce: root only
        EXPECT_EQ(got, expected_output(c, ReduceOp::sum, kCount, n, rank, salt))
            << kind << " " << collective_name(c) << " salt " << salt;
      }
    }
  }
}

}  // namespace
}  // namespace dts

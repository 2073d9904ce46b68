// The `faulty(KIND,INNER)` backend: INNER with one fault injected on one rank (the victim), on
// every collective and point-to-point call, so that dtsuite can prove that its checks catch broken
// stacks. A conformance suite that never failed on a broken stack has not shown it can fail at all.
//
// Each kind models a failure real stacks have had, and names the check that must catch it:
//   bitflip  a corrupted element (bad NIC/NVLink, memory error, a reduction kernel that is off by
//            one ULP): after the collective, bit 0 of the victim's output element count/2 flips;
//            point to point, bit 0 of element count/2 of what the victim receives (recv, and irecv
//            when its Work completes through test() or wait()). The smallest possible corruption,
//            so the collectives suite's bit-exact check on exact inputs must fail it (a tolerance
//            check could let a wrong low bit pass).
//   drop     a rank whose contribution is lost (a skipped ring step, a wrong peer, a race on the
//            send buffer): the victim contributes the op's identity to reductions and zeros to
//            all_gather / all_to_all / send_recv / broadcast (as root); as a broadcast receiver it
//            never receives. Point to point, the victim sends zeros (send, isend); what it
//            receives is intact. The sum check must fail: every rank's input is nonzero.
//   stale    a buffer that is never refreshed (a missing stream sync, a cached registration, an
//            output read before the op completed): the victim returns the previous call's result
//            of the same op and size. Point to point, what the victim receives (recv or irecv, from
//            any peer) is the data of its previous receive of the same byte size (remembered per
//            size, so a ring's alternating segment sizes are hit too; the first receive of a size
//            is intact). Must fail because the suite changes inputs between calls.
//   hang     a rank that never enters the collective (deadlock, lost message): the victim blocks
//            before each collective or point-to-point call until release_hangs(), its peers block
//            inside INNER waiting for it. Must hit the harness watchdog's timeout (verdict timeout,
//            exit code 3), not hang CI forever.
//   delay    a straggler (a slow node, OS noise): the victim sleeps before each collective and
//            point-to-point call (50 ms, or delay(MS)). Results stay correct; timings must show it.
//   error    a stack that reports an error on one rank (a failed device call, a lost connection):
//            the victim's call throws Error{backend} before it enters INNER, and its peers wait
//            inside INNER for it. The harness must end the case at once with a fail row naming
//            the error, not wait for the watchdog's timeout. error(all): every rank's call throws.
//   saturate a reduction whose arithmetic clamps instead of following the stated semantics: the
//            victim's result of all_reduce, reduce_scatter and reduce (the root's, for reduce)
//            is its inputs combined in rank order with integer sums and products that stop at
//            the dtype's maximum or minimum, and float results that overflow from finite
//            operands clamped at the largest finite value. The overflow inputs must fail it
//            ("saturates at 127").
//   dropnan  the same reductions on the victim, with min and max ignoring a NaN operand (as C's
//            fmin/fmax and NCCL's float min/max do) instead of propagating it: the overflow
//            inputs must fail it ("NaN dropped by max"). saturate and dropnan change no data
//            movement and no point-to-point call: a ring over them does its own arithmetic and
//            passes. all_reduce_async is not faulted by them.
//   abort    a stack that gives its communicator up after an error, as NCCL does after its first
//            error or timeout (ncclCommAbort): at the first armed collective, every rank of a group
//            with the victim throws Error{backend} before it enters INNER (so none waits for
//            another there), and the victim's communicator is aborted: every later call of it
//            throws. The harness must fail that one case, then run the next on a new communicator.
//            Once per process: the communicator made to replace it runs clean, as a stack does
//            after a transient error. Point-to-point calls are not armed by it (the victim alone
//            would leave its peer waiting), only refused once aborted.
//   crash    a library that dies of a signal inside a call (Gloo's SIGFPE on an all_gather of 0
//            elements, a segfault in a vendor's kernel launch): the victim raises SIGFPE inside
//            each armed collective and point-to-point call, before it enters INNER. The process
//            ends as the signal's default action ends it (the harness first writes one line naming
//            the rank, node, signal and case); the launcher ends its peers, and rank 0 must write
//            the case's FAIL row naming the rank that stopped answering, keeping every row before.
//            A crash on rank 0 itself leaves that line and the rows so far: no handler can write
//            a row (the sinks lock and allocate).
// send_recv is a collective here (the suite's op, called by every rank): faulted and counted as one.
// barrier passes through (refused only once abort struck): it carries no data, and a hang in it
// would not say which op hung.
//
// The victim is a process (CommOptions::fault_rank, --fault-rank R). fault_rank is a rank of the
// communicator faulty(...) was made on; in every group split from it, the same process is the
// victim, and a group without it has none. Resolving fault_rank again in each group would fault
// a different process per group (the last rank of each, by default), or none where the group is
// smaller than R, so a strategy's process groups would hide or multiply the fault.
//
// Arming (CommOptions::fault_after_calls, --fault-after N): the first N collectives run clean,
// counted on every rank, so the fault starts at the same collective everywhere. Point-to-point
// calls (send, recv, isend, irecv: one each) have their own count, and the victim's first N of
// them run clean. One count for both would arm the collectives at different calls on different
// ranks, which make different numbers of point-to-point calls. Over faulty, a ring counts its
// chunk transfers, not its collectives.
//
// Rate (CommOptions::fault_rate, --fault-rate P): of the armed calls, only the fraction P is
// faulted, an intermittent fault (nccl-tests #172: one node among 1,000 corrupting now and then).
// Call k is faulted when splitmix64(fault_seed, k) / 2^64 < P: a hash, not a periodic pattern that
// could fall in step with a suite's own cycle of calls, and alike on every rank (the same count,
// the same seed), so the ranks agree on it as the arithmetic and abort kinds need.
#include "comm/faulty/faulty_communicator.h"

#include <csignal>
#include <atomic>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <thread>
#include <type_traits>
#include <utility>

#include "core/buffer.h"
#include "core/element.h"
#include "core/reduce.h"

namespace dts {

namespace {

constexpr std::string_view kKindList =
    "bitflip, drop, stale, hang, delay, delay(MS), error, error(all), saturate, dropnan, abort, crash";
// A straggler long enough to stand out of MPI's microsecond latencies, short enough for tests.
constexpr std::chrono::milliseconds kDefaultDelay{50};
// An hour: past any watchdog; a longer "delay" is a typo for something else.
constexpr long kMaxDelayMs = 3'600'000;
// How often a hung victim looks for release_hangs(): cheap, and quick enough for tests.
constexpr std::chrono::milliseconds kHangPoll{10};

struct HangState {
  std::atomic<uint64_t> release_generation{0};
  std::atomic<int> hanging{0};
};
HangState& hang_state() {
  static HangState state;
  return state;
}

// Whether an abort struck in this process (see abort in the list above).
std::atomic<bool>& abort_struck() {
  static std::atomic<bool> struck{false};
  return struck;
}

std::vector<std::byte> identity_buffer(DType dtype, ReduceOp op, size_t count) {
  std::vector<std::byte> buffer(count * size_of(dtype));
  fill_identity(dtype, op, buffer.data(), count);
  return buffer;
}

// Zero bytes are the value 0 in every dtype (integers and IEEE floats alike).
std::vector<std::byte> zero_buffer(DType dtype, size_t count) { return std::vector<std::byte>(count * size_of(dtype)); }

// Flips bit 0 of element count/2: the least significant bit of an integer, the last mantissa bit
// of a float, so the value changes by the smallest amount the dtype can represent.
void flip_lowest_bit(void* out, size_t count, DType dtype) {
  if (count == 0) return;
  const size_t width = size_of(dtype);
  auto* element = static_cast<unsigned char*>(out) + (count / 2) * width;
  const size_t lowest_byte = std::endian::native == std::endian::little ? 0 : width - 1;
  element[lowest_byte] = static_cast<unsigned char>(element[lowest_byte] ^ 1u);
}

// Remembers `out` as the op's latest true result and, when `armed`, replaces it with the previous one.
void apply_stale(FaultyCommunicator::StaleMemory& memory, FaultyCommunicator::Op op, void* out, size_t bytes,
                 bool armed = true) {
  auto& previous = op == FaultyCommunicator::Op::receive ? memory.receives[bytes]
                                                         : memory.collectives[static_cast<size_t>(op)];
  const auto* data = static_cast<const std::byte*>(out);
  std::vector<std::byte> current(data, data + bytes);
  if (armed && previous && previous->size() == bytes && bytes > 0) std::memcpy(out, previous->data(), bytes);
  previous = std::move(current);
}

// An operation in flight through the fault (all_reduce_async, isend, irecv): owns the victim's
// scratch input (drop's identity or zeros) until the inner operation is done, and corrupts the
// output (bitflip, stale) once, when the inner Work completes.
class FaultyWork final : public Work {
 public:
  FaultyWork(std::vector<std::byte> scratch, std::unique_ptr<Work> inner, std::function<void()> on_complete)
      : scratch_(std::move(scratch)), inner_(std::move(inner)), on_complete_(std::move(on_complete)) {}

  bool test() override {
    if (!inner_->test()) return false;
    complete();
    return true;
  }
  void wait(std::chrono::duration<double> timeout) override {
    inner_->wait(timeout);
    complete();
  }

 private:
  void complete() {
    if (on_complete_) std::exchange(on_complete_, nullptr)();
  }
  // Declared before inner_ so it is destroyed after it: an abandoned inner Work may still read it.
  std::vector<std::byte> scratch_;
  std::unique_ptr<Work> inner_;
  std::function<void()> on_complete_;
};

bool touches_data(FaultKind kind) {
  return kind == FaultKind::bitflip || kind == FaultKind::drop || kind == FaultKind::stale ||
         kind == FaultKind::saturate || kind == FaultKind::dropnan;
}

bool changes_arithmetic(FaultKind kind) { return kind == FaultKind::saturate || kind == FaultKind::dropnan; }

// a OP b with saturate's or dropnan's arithmetic: the stated result (core/reduce.h), then what
// the fault changes about it.
template <class T>
T misbehaving_combine(FaultKind kind, DType dtype, ReduceOp op, T a, T b) {
  T result = a;
  reduce_into(dtype, op, &result, &b, 1);
  const bool arithmetic = op == ReduceOp::sum || op == ReduceOp::avg || op == ReduceOp::prod;
  if constexpr (std::is_integral_v<T>) {
    T unused;
    const bool overflows = op == ReduceOp::prod ? __builtin_mul_overflow(a, b, &unused)
                                                : __builtin_add_overflow(a, b, &unused);
    if (kind == FaultKind::saturate && arithmetic && overflows) {
      // The true result's sign: a sum's is b's (it overflowed past b's side), a product's the signs'.
      const bool negative = op == ReduceOp::prod ? (a < 0) != (b < 0) : b < 0;
      result = negative ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    }
  } else {
    const auto value = [](T v) { return static_cast<double>(v); };
    // Overflow of finite inputs: ±inf, or NaN in e4m3, which has no inf (nothing else makes a
    // NaN of finite values). Its direction is the unrounded result's.
    if (kind == FaultKind::saturate && arithmetic && !std::isfinite(value(result)) && std::isfinite(value(a)) &&
        std::isfinite(value(b))) {
      T largest = std::numeric_limits<T>::max();
      if constexpr (kIsNarrowFloat<T>) {
        largest = T(std::numeric_limits<double>::infinity());
        --largest.bits;  // the encoding just below +inf (e4m3: below NaN) is the largest finite value
      }
      const double unrounded = op == ReduceOp::prod ? value(a) * value(b) : value(a) + value(b);
      result = unrounded > 0 ? largest : T(-value(largest));
    }
    if (kind == FaultKind::dropnan && (op == ReduceOp::min || op == ReduceOp::max)) {
      if (std::isnan(value(a))) result = b;
      else if (std::isnan(value(b))) result = a;
    }
  }
  return result;
}

}  // namespace

FaultSpec parse_fault_spec(std::string_view text) {
  const auto unknown = [&] {
    return Error(Error::Kind::invalid_argument,
                 "unknown fault kind '" + std::string(text) + "' (kinds: " + std::string(kKindList) + ")");
  };
  if (text == "bitflip") return {FaultKind::bitflip, kDefaultDelay};
  if (text == "drop") return {FaultKind::drop, kDefaultDelay};
  if (text == "stale") return {FaultKind::stale, kDefaultDelay};
  if (text == "hang") return {FaultKind::hang, kDefaultDelay};
  if (text == "delay") return {FaultKind::delay, kDefaultDelay};
  if (text == "error") return {FaultKind::error, kDefaultDelay};
  if (text == "error(all)") return {FaultKind::error, kDefaultDelay, true};
  if (text == "saturate") return {FaultKind::saturate, kDefaultDelay};
  if (text == "dropnan") return {FaultKind::dropnan, kDefaultDelay};
  if (text == "abort") return {FaultKind::abort, kDefaultDelay};
  if (text == "crash") return {FaultKind::crash, kDefaultDelay};
  constexpr std::string_view kDelayOpen = "delay(";
  if (text.starts_with(kDelayOpen) && text.ends_with(')')) {
    const std::string_view digits = text.substr(kDelayOpen.size(), text.size() - kDelayOpen.size() - 1);
    long ms = -1;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), ms);
    if (digits.empty() || error != std::errc{} || end != digits.data() + digits.size() || ms < 0 ||
        ms > kMaxDelayMs) {
      throw Error(Error::Kind::invalid_argument, "bad fault kind '" + std::string(text) +
                                                     "': delay(MS) takes milliseconds, 0 to " +
                                                     std::to_string(kMaxDelayMs));
    }
    return {FaultKind::delay, std::chrono::milliseconds(ms)};
  }
  throw unknown();
}

std::string to_string(const FaultSpec& fault) {
  switch (fault.kind) {
    case FaultKind::bitflip: return "bitflip";
    case FaultKind::drop: return "drop";
    case FaultKind::stale: return "stale";
    case FaultKind::hang: return "hang";
    case FaultKind::delay:
      return fault.delay == kDefaultDelay ? "delay" : "delay(" + std::to_string(fault.delay.count()) + ")";
    case FaultKind::error: return fault.every_rank ? "error(all)" : "error";
    case FaultKind::saturate: return "saturate";
    case FaultKind::dropnan: return "dropnan";
    case FaultKind::abort: return "abort";
    case FaultKind::crash: return "crash";
  }
  return "?";
}

FaultyCommunicator::FaultyCommunicator(FaultSpec fault, std::unique_ptr<Communicator> inner,
                                       const CommOptions& options)
    : ForwardingCommunicator(std::move(inner), "faulty", to_string(fault)),
      fault_(fault),
      options_(options),
      stale_(std::make_shared<StaleMemory>()) {
  require_injectable();
  const int n = inner_->size();
  victim_ = options.fault_rank < 0 ? n - 1 : options.fault_rank;
  if (victim_ >= n) {
    throw Error(Error::Kind::invalid_argument, std::string(backend()) + ": fault_rank " +
                                                   std::to_string(options.fault_rank) +
                                                   " is not a rank of a communicator of " + std::to_string(n));
  }
}

FaultyCommunicator::FaultyCommunicator(FaultSpec fault, std::unique_ptr<Communicator> inner_group,
                                       const CommOptions& options, SplitGroup group)
    : ForwardingCommunicator(std::move(inner_group), "faulty", to_string(fault)),
      fault_(fault),
      options_(options),
      stale_(std::make_shared<StaleMemory>()) {
  require_injectable();  // every rank of the group throws alike, before the all_reduce below
  // At most one process of the group is the victim: the max of (group rank or -1) is its rank.
  // Through a Buffer in the group's memory, since INNER may want device buffers (hang, delay).
  const int32_t mine = group.this_process_is_victim ? rank() : -1;
  Buffer scratch(memory(), sizeof mine);
  scratch.copy_from_host(&mine, sizeof mine);
  inner_->all_reduce(scratch.data(), scratch.data(), 1, DType::i32, ReduceOp::max);
  int32_t victim = -1;
  scratch.copy_to_host(&victim, sizeof victim);
  victim_ = victim;
}

void FaultyCommunicator::require_injectable() const {
  if (touches_data(fault_.kind) && inner_->memory() != Memory::host) {
    // A set-up error, not a SKIP per call: a fault that cannot be injected must not pass silently.
    throw Error(Error::Kind::invalid_argument,
                std::string(backend()) + ": fault kind " + to_string(fault_) +
                    " reads and writes buffers on the host, but inner backend " + std::string(inner_->backend()) +
                    " keeps them in " + std::string(name(inner_->memory())) +
                    " memory; only hang and delay can be injected there");
  }
}

FaultyCommunicator::~FaultyCommunicator() = default;

void FaultyCommunicator::release_hangs() { hang_state().release_generation.fetch_add(1); }

int FaultyCommunicator::hanging_calls() { return hang_state().hanging.load(); }

void FaultyCommunicator::rearm_abort() { abort_struck().store(false); }

void FaultyCommunicator::require_host(std::string_view op) const {
  // A second guard (the constructor refuses such a stack). Checked on every rank, not only the
  // victim: if only the victim threw, its peers would enter the inner operation and wait forever.
  if (touches_data(fault_.kind) && memory() != Memory::host) {
    throw Error(Error::Kind::unsupported, std::string(backend()) + ": " + to_string(fault_) + " on " + std::string(op) +
                                              " needs host memory, and " + std::string(inner_->backend()) +
                                              " uses device memory");
  }
}

void FaultyCommunicator::before_collective() {
  throw_if_aborted();
  ++calls_;  // on every rank, so a fault armed after N calls starts at the same call everywhere
  if (fault_.kind == FaultKind::abort) abort_if_armed();
  if (is_victim()) stall();
}

bool FaultyCommunicator::picked(int64_t call) const {
  if (options_.fault_rate >= 1) return true;
  // splitmix64 (Steele, Lea and Flood 2014) of the seed and the call's number.
  uint64_t z = options_.fault_seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(call) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53 < options_.fault_rate;
}

void FaultyCommunicator::abort_if_armed() {
  // Decided alike on every rank of the group: its victim, the call count, and the process's flag
  // (every rank of the group strikes at this same call, so none has struck before).
  if (victim_ < 0 || !armed() || abort_struck().exchange(true)) return;
  if (rank() == victim_) aborted_ = true;
  throw Error(Error::Kind::backend, "faulty(abort): the stack reported an error on rank " + std::to_string(victim_) +
                                        " and aborted its communicator there");
}

void FaultyCommunicator::throw_if_aborted() const {
  if (aborted_) {
    throw Error(Error::Kind::backend, "faulty(abort): the communicator was aborted after an earlier error");
  }
}

void FaultyCommunicator::abort() {
  aborted_ = true;
  inner_->abort();
}

void FaultyCommunicator::barrier() {
  throw_if_aborted();
  inner_->barrier();
}

void FaultyCommunicator::synchronize() {
  throw_if_aborted();
  inner_->synchronize();
}

std::unique_ptr<Communicator> FaultyCommunicator::split(int color, int key) {
  throw_if_aborted();
  return ForwardingCommunicator::split(color, key);
}

bool FaultyCommunicator::before_point_to_point(std::string_view op) {
  throw_if_aborted();
  require_host(op);
  ++point_to_point_calls_;
  const bool faulted =
      on_victim() && point_to_point_calls_ > options_.fault_after_calls && picked(point_to_point_calls_);
  if (faulted) stall();
  return faulted;
}

void FaultyCommunicator::stall() const {
  if (fault_.kind == FaultKind::delay) {
    std::this_thread::sleep_for(fault_.delay);
  } else if (fault_.kind == FaultKind::hang) {
    auto& state = hang_state();
    const uint64_t entered = state.release_generation.load();
    state.hanging.fetch_add(1);
    while (state.release_generation.load() == entered) std::this_thread::sleep_for(kHangPoll);
    state.hanging.fetch_sub(1);
  } else if (fault_.kind == FaultKind::crash) {
    ::raise(SIGFPE);  // the fault this kind models: the process dies here, as a crashing library's would
  } else if (fault_.kind == FaultKind::error) {
    throw Error(Error::Kind::backend, "faulty(" + to_string(fault_) + "): the stack reported an error on rank " +
                                          std::to_string(rank()));
  }
}

std::function<void()> FaultyCommunicator::output_fault(Op op, void* out, size_t out_count, DType dtype,
                                                       int corrupt_rank, bool armed) const {
  if (corrupt_rank < 0 || rank() != corrupt_rank) return nullptr;
  if (fault_.kind == FaultKind::bitflip && armed) {
    return [out, out_count, dtype] { flip_lowest_bit(out, out_count, dtype); };
  }
  if (fault_.kind == FaultKind::stale) {
    // Remembers even before arming, so the first armed call has a previous result to return.
    // The closure holds the memory, so an async Work may outlive this communicator.
    return [memory = stale_, op, out, bytes = out_count * size_of(dtype), armed] {
      apply_stale(*memory, op, out, bytes, armed);
    };
  }
  return nullptr;
}

std::vector<std::byte> FaultyCommunicator::gather_inputs(const void* in, size_t in_count, DType dtype) {
  // Decided alike on every rank: the kind, the group's victim and the call count.
  if (!changes_arithmetic(fault_.kind) || victim_ < 0 || !armed()) return {};
  std::vector<std::byte> gathered(in_count * static_cast<size_t>(size()) * size_of(dtype));
  inner_->all_gather(in, gathered.data(), in_count, dtype);
  return gathered;
}

void FaultyCommunicator::misreduce(const std::vector<std::byte>& gathered, void* out, size_t out_count,
                                   size_t offset, DType dtype, ReduceOp op, int corrupt_rank) const {
  if (gathered.empty() || corrupt_rank < 0 || rank() != corrupt_rank) return;
  const size_t n = static_cast<size_t>(size());
  const size_t in_count = gathered.size() / size_of(dtype) / n;
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto* inputs = reinterpret_cast<const T*>(gathered.data());
    T* result = static_cast<T*>(out);
    for (size_t i = 0; i < out_count; ++i) {
      T acc = inputs[offset + i];
      for (size_t r = 1; r < n; ++r) acc = misbehaving_combine(fault_.kind, dtype, op, acc, inputs[r * in_count + offset + i]);
      result[i] = acc;
    }
  });
  if (op == ReduceOp::avg) divide_by(dtype, out, out_count, size());
}

void FaultyCommunicator::after_collective(Op op, void* out, size_t out_count, DType dtype, int corrupt_rank) {
  if (auto fault = output_fault(op, out, out_count, dtype, corrupt_rank, armed())) fault();
}

void FaultyCommunicator::all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) {
  require_host("all_reduce");
  before_collective();
  if (fault_.kind == FaultKind::drop && is_victim()) {
    // Out of place from the scratch even when the caller was in place (in == out): the result
    // still lands in `out`, and the victim's data never enters the reduction.
    const auto identity = identity_buffer(dtype, op, count);
    inner_->all_reduce(identity.data(), out, count, dtype, op);
    return;
  }
  const auto inputs = gather_inputs(in, count, dtype);
  inner_->all_reduce(in, out, count, dtype, op);
  after_collective(Op::all_reduce, out, count, dtype, victim_);
  misreduce(inputs, out, count, 0, dtype, op, victim_);
}

void FaultyCommunicator::reduce_scatter(const void* in, void* out, size_t out_count, DType dtype, ReduceOp op) {
  require_host("reduce_scatter");
  before_collective();
  if (fault_.kind == FaultKind::drop && is_victim()) {
    // A separate scratch is never `out - rank * out_count`, so the inner call is out of place
    // even when the caller's was in place (out == in + rank * out_count).
    const auto identity = identity_buffer(dtype, op, out_count * static_cast<size_t>(size()));
    inner_->reduce_scatter(identity.data(), out, out_count, dtype, op);
    return;
  }
  const auto inputs = gather_inputs(in, out_count * static_cast<size_t>(size()), dtype);
  inner_->reduce_scatter(in, out, out_count, dtype, op);
  after_collective(Op::reduce_scatter, out, out_count, dtype, victim_);
  misreduce(inputs, out, out_count, static_cast<size_t>(rank()) * out_count, dtype, op, victim_);
}

void FaultyCommunicator::all_gather(const void* in, void* out, size_t in_count, DType dtype) {
  require_host("all_gather");
  before_collective();
  if (fault_.kind == FaultKind::drop && is_victim()) {
    const auto zeros = zero_buffer(dtype, in_count);
    inner_->all_gather(zeros.data(), out, in_count, dtype);
    return;
  }
  inner_->all_gather(in, out, in_count, dtype);
  after_collective(Op::all_gather, out, in_count * static_cast<size_t>(size()), dtype, victim_);
}

void FaultyCommunicator::broadcast(const void* in, void* out, size_t count, DType dtype, int root) {
  require_host("broadcast");
  before_collective();
  if (fault_.kind == FaultKind::drop && is_victim()) {
    if (rank() == root) {
      // The root's data is lost on the way out: everyone, the root included, gets zeros.
      const auto zeros = zero_buffer(dtype, count);
      inner_->broadcast(zeros.data(), out, count, dtype, root);
    } else {
      // The data never arrives: received into scratch, `out` keeps whatever it held.
      auto scratch = zero_buffer(dtype, count);
      inner_->broadcast(scratch.data(), scratch.data(), count, dtype, root);
    }
    return;
  }
  inner_->broadcast(in, out, count, dtype, root);
  after_collective(Op::broadcast, out, count, dtype, victim_);
}

void FaultyCommunicator::reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op, int root) {
  require_host("reduce");
  before_collective();
  if (fault_.kind == FaultKind::drop && is_victim()) {
    const auto identity = identity_buffer(dtype, op, count);
    inner_->reduce(identity.data(), out, count, dtype, op, root);
    return;
  }
  const auto inputs = gather_inputs(in, count, dtype);
  inner_->reduce(in, out, count, dtype, op, root);
  // Only the root's output is defined: corrupting another rank's would be invisible. A group
  // without the victim stays clean.
  after_collective(Op::reduce, out, count, dtype, victim_ >= 0 ? root : -1);
  misreduce(inputs, out, count, 0, dtype, op, victim_ >= 0 ? root : -1);
}

void FaultyCommunicator::all_to_all(const void* in, void* out, size_t count_per_peer, DType dtype) {
  require_host("all_to_all");
  before_collective();
  const size_t total = count_per_peer * static_cast<size_t>(size());
  if (fault_.kind == FaultKind::drop && is_victim()) {
    const auto zeros = zero_buffer(dtype, total);
    inner_->all_to_all(zeros.data(), out, count_per_peer, dtype);
    return;
  }
  inner_->all_to_all(in, out, count_per_peer, dtype);
  after_collective(Op::all_to_all, out, total, dtype, victim_);
}

void FaultyCommunicator::send_recv(const void* in, int send_peer, void* out, int recv_peer, size_t count,
                                   DType dtype) {
  require_host("send_recv");
  before_collective();
  if (fault_.kind == FaultKind::drop && is_victim()) {
    const auto zeros = zero_buffer(dtype, count);
    inner_->send_recv(zeros.data(), send_peer, out, recv_peer, count, dtype);
    return;
  }
  inner_->send_recv(in, send_peer, out, recv_peer, count, dtype);
  after_collective(Op::send_recv, out, count, dtype, victim_);
}

std::unique_ptr<Work> FaultyCommunicator::all_reduce_async(const void* in, void* out, size_t count, DType dtype,
                                                           ReduceOp op) {
  require_host("all_reduce_async");
  before_collective();
  if (fault_.kind == FaultKind::drop && is_victim()) {
    auto identity = identity_buffer(dtype, op, count);
    auto inner = inner_->all_reduce_async(identity.data(), out, count, dtype, op);
    // Moving the vector keeps its heap block, so the pointer the inner op holds stays valid.
    return std::make_unique<FaultyWork>(std::move(identity), std::move(inner), nullptr);
  }
  auto inner = inner_->all_reduce_async(in, out, count, dtype, op);
  auto on_complete = output_fault(Op::all_reduce_async, out, count, dtype, victim_, armed());
  if (!on_complete) return inner;
  return std::make_unique<FaultyWork>(std::vector<std::byte>{}, std::move(inner), std::move(on_complete));
}

void FaultyCommunicator::send(const void* in, size_t count, DType dtype, int peer) {
  if (before_point_to_point("send") && fault_.kind == FaultKind::drop) {
    const auto zeros = zero_buffer(dtype, count);
    inner_->send(zeros.data(), count, dtype, peer);
    return;
  }
  inner_->send(in, count, dtype, peer);
}

void FaultyCommunicator::recv(void* out, size_t count, DType dtype, int peer) {
  const bool faulted = before_point_to_point("recv");
  inner_->recv(out, count, dtype, peer);
  if (auto fault = output_fault(Op::receive, out, count, dtype, victim_, faulted)) fault();
}

std::unique_ptr<Work> FaultyCommunicator::isend(const void* in, size_t count, DType dtype, int peer) {
  if (before_point_to_point("isend") && fault_.kind == FaultKind::drop) {
    auto zeros = zero_buffer(dtype, count);
    auto inner = inner_->isend(zeros.data(), count, dtype, peer);
    // The Work owns the zeros until the send is done (moving the vector keeps its heap block).
    return std::make_unique<FaultyWork>(std::move(zeros), std::move(inner), nullptr);
  }
  return inner_->isend(in, count, dtype, peer);
}

std::unique_ptr<Work> FaultyCommunicator::irecv(void* out, size_t count, DType dtype, int peer) {
  const bool faulted = before_point_to_point("irecv");
  auto inner = inner_->irecv(out, count, dtype, peer);
  auto on_complete = output_fault(Op::receive, out, count, dtype, victim_, faulted);
  if (!on_complete) return inner;
  return std::make_unique<FaultyWork>(std::vector<std::byte>{}, std::move(inner), std::move(on_complete));
}

std::unique_ptr<Communicator> FaultyCommunicator::wrap(std::unique_ptr<Communicator> inner_group) {
  // Not make_unique: the group constructor is private.
  return std::unique_ptr<Communicator>(
      new FaultyCommunicator(fault_, std::move(inner_group), options_, SplitGroup{on_victim()}));
}

namespace {
std::unique_ptr<Communicator> make_faulty(const BackendSpec& spec, const CommOptions& options) {
  if (spec.args.size() != 2) {
    throw Error(Error::Kind::invalid_argument,
                "backend faulty takes two arguments, faulty(KIND,INNER), e.g. faulty(bitflip,mpi); KIND is one of " +
                    std::string(kKindList));
  }
  // The kind first: a typo should not cost a communicator (an MPI_Comm_dup on every rank).
  const FaultSpec fault = parse_fault_spec(spec.args[0]);
  return std::make_unique<FaultyCommunicator>(fault, make_communicator(spec.args[1], options), options);
}
}  // namespace

DTS_REGISTER_BACKEND("faulty", "faulty(KIND,INNER)",
                     "INNER with one fault injected on one rank; KIND: " + std::string(kKindList),
                     make_faulty);

}  // namespace dts

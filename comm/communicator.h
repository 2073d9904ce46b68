// The Communicator interface every backend implements (mpi, ring(mpi), faulty(...), later nccl),
// the async Work handle, and make_communicator(), which builds a backend from a spec string.
// Each collective's default body throws Error{unsupported} naming backend and op: a suite
// reports that case as SKIP, not FAIL.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace dts {

// Handle of an operation in flight. wait() throws Error{timeout} when the operation has not
// completed within `timeout` (zero: wait without limit).
class Work {
 public:
  virtual ~Work() = default;
  virtual bool test() = 0;
  virtual void wait(std::chrono::duration<double> timeout = std::chrono::duration<double>::zero()) = 0;
};

// Waits for `work` without keeping a core busy: test() and a nap between tries. For a rank with
// nothing to do while others measure (a pair of the topology matrix, one rank of the hardware
// suite's alone mode): a library's blocking wait polls, and on a machine with fewer cores than
// ranks the poller takes a core the measured ranks need. A nap shorter than the kernel's
// migration cost (0.5 ms by default) keeps its core from ever looking idle, so the scheduler
// does not move a measured rank there: a wait that may last long naps longer.
void wait_quietly(Work& work, std::chrono::microseconds nap = std::chrono::microseconds(200));

// A Work that is already complete (operations run synchronously by a default body).
class CompletedWork final : public Work {
 public:
  bool test() override { return true; }
  void wait(std::chrono::duration<double>) override {}
};

// Times a loop of operations the way the communicator's library runs them: mark() before the
// first iteration and after each one; intervals() then waits for the last mark and returns the
// seconds between consecutive marks. A host backend's call is done when it returns, so its timer
// reads steady_clock; a device backend records events on its library's stream (as nccl-tests does
// with cudaEventRecord), so marking adds no synchronization to the loop.
class Timer {
 public:
  virtual ~Timer() = default;
  virtual void mark() = 0;
  virtual std::vector<double> intervals() = 0;
};

// Lets the harness's watchdog see, from another thread, whether this rank is inside a
// communication call of the stack under test. Leaf backends (mpi, nccl) update it around every
// library call; wrappers pass it down through CommOptions. A rank that is not inside while its
// peers are has not arrived at the collective.
// It also counts traffic: bytes this rank handed to point-to-point sends of the leaf library
// (the real wire volume when the stack is an algorithm over send/recv, such as ring(mpi)), and
// library collectives whose wire volume is hidden inside the library (opaque).
// The library calls an observer names (a stalled rank says which one it waits in and which one
// it last completed). A wrapper's collective shows as the leaf calls it is made of (ring(mpi)'s
// all_reduce as irecv and wait).
enum class ObservedOp : int {
  none, all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all, send, recv, send_recv, isend, irecv,
  wait, barrier, all_reduce_async
};
std::string_view name(ObservedOp op);  // "all_reduce", ...; "none"
ObservedOp observed_op_of(int64_t code);  // none for a code out of range

struct OpObserver {
  std::atomic<int> inside{0};
  std::atomic<int64_t> entered{0};
  std::atomic<int64_t> bytes_sent{0};
  // Point-to-point bytes received: mpi counts what each completed receive's status says arrived;
  // nccl (no status) the posted count, which its send must match.
  std::atomic<int64_t> bytes_received{0};
  std::atomic<int64_t> opaque_collectives{0};
  std::atomic<int> current{0};         // ObservedOp of the call in progress (none: outside any)
  std::atomic<int> last_completed{0};  // ObservedOp of the last call that returned
  // Where the case is in a sequence of its own, set by the suite (the replay: the index of the
  // trace operation it issued last), so that a hang names it; -1: none. Reset at each case.
  std::atomic<int64_t> position{-1};
};

// RAII scope a leaf backend opens around each library call; no-op without an observer.
class ObservedCall {
 public:
  explicit ObservedCall(OpObserver* observer, ObservedOp op = ObservedOp::none) : observer_(observer), op_(op) {
    if (observer_) {
      observer_->entered.fetch_add(1, std::memory_order_relaxed);
      observer_->inside.fetch_add(1, std::memory_order_relaxed);
      observer_->current.store(static_cast<int>(op_), std::memory_order_relaxed);
    }
  }
  ~ObservedCall() {
    if (!observer_) return;
    observer_->last_completed.store(static_cast<int>(op_), std::memory_order_relaxed);
    if (observer_->inside.fetch_sub(1, std::memory_order_relaxed) == 1) {
      observer_->current.store(static_cast<int>(ObservedOp::none), std::memory_order_relaxed);
    }
  }
  ObservedCall(const ObservedCall&) = delete;
  ObservedCall& operator=(const ObservedCall&) = delete;

 private:
  OpObserver* observer_;
  ObservedOp op_;
};

// A leaf backend's traffic counters (no-ops without an observer): bytes a point-to-point call
// sent or received, and collectives whose traffic the library keeps to itself.
inline void count_sent(OpObserver* observer, int64_t bytes) {
  if (observer) observer->bytes_sent.fetch_add(bytes, std::memory_order_relaxed);
}
inline void count_received(OpObserver* observer, int64_t bytes) {
  if (observer) observer->bytes_received.fetch_add(bytes, std::memory_order_relaxed);
}
inline void count_opaque(OpObserver* observer) {
  if (observer) observer->opaque_collectives.fetch_add(1, std::memory_order_relaxed);
}

struct CommOptions {
  // Upper bound for any single wait inside a backend (Work::wait, reference algorithms); 0: none.
  double timeout_seconds = 0;
  // Chunk size for the pipelined reference algorithms (ring): each step moves its segment in
  // pieces of this size so the reduction of one chunk overlaps the transfer of the next. 0: the
  // algorithm's own rule, from the message size and rank count (ring_chunk_bytes, ring.h).
  size_t chunk_bytes = 0;
  // Rank that fault injection targets; -1: the last rank of the communicator.
  int fault_rank = -1;
  // Collectives that run clean before fault injection starts (a stack that breaks mid-run).
  int64_t fault_after_calls = 0;
  // Of the armed calls, the fraction that is faulted (an intermittent fault: a marginal link, a
  // flaky memory cell); 1: every one. Which calls is decided by a hash of the call's number and
  // fault_seed, alike on every rank, so a run is reproducible and its ranks agree.
  double fault_rate = 1;
  uint64_t fault_seed = 1;
  // Watchdog instrumentation (see OpObserver); null: none.
  std::shared_ptr<OpObserver> observer;
  // This process's node name for backends that group ranks by node (hier); empty: node_name()'s
  // default (DTS_NODE, else the host name; comm/topology.h).
  std::string node_name;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual std::string_view backend() const = 0;  // the spec it was made from: "mpi", "ring(mpi)"
  virtual std::string version() const = 0;       // library version string
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Memory memory() const = 0;  // where buffers must live
  // Whether this backend reaches device memory only through core/buffer.h's copies, so that its
  // device memory may be either device kind, the emulated one included (staged(INNER)); a backend
  // that hands device pointers to a device library (nccl) runs on CUDA only. Wrappers ask INNER.
  virtual bool reaches_device_by_copies() const { return false; }

  // Collectives. `in == out` means in place; for reduce_scatter in place means
  // out == in + rank * out_count, for all_gather in == out + rank * in_count (NCCL's convention).
  virtual void all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op);
  virtual void reduce_scatter(const void* in, void* out, size_t out_count, DType dtype, ReduceOp op);
  virtual void all_gather(const void* in, void* out, size_t in_count, DType dtype);
  // `in` is read on the root only; every rank's `out` receives the root's data (in == out: in place).
  virtual void broadcast(const void* in, void* out, size_t count, DType dtype, int root);
  virtual void reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op, int root);
  virtual void all_to_all(const void* in, void* out, size_t count_per_peer, DType dtype);

  // Point to point. send_recv sends `in` to send_peer and receives into `out` from recv_peer in
  // one deadlock-free exchange (in == out: in place).
  virtual void send(const void* in, size_t count, DType dtype, int peer);
  virtual void recv(void* out, size_t count, DType dtype, int peer);
  virtual void send_recv(const void* in, int send_peer, void* out, int recv_peer, size_t count, DType dtype);
  virtual std::unique_ptr<Work> isend(const void* in, size_t count, DType dtype, int peer);
  virtual std::unique_ptr<Work> irecv(void* out, size_t count, DType dtype, int peer);

  virtual std::unique_ptr<Work> all_reduce_async(const void* in, void* out, size_t count, DType dtype,
                                                 ReduceOp op);

  virtual void barrier() = 0;
  // Waits until every operation this rank issued on this communicator has completed: a device
  // backend's calls return once enqueued on its stream. Host backends: nothing to wait for.
  virtual void synchronize() {}
  // A timer for loops of this communicator's operations (see Timer), ready for `marks` calls of
  // mark() (iterations + 1) without allocating inside the loop. Default: steady_clock, each mark
  // after synchronize().
  virtual std::unique_ptr<Timer> timer(size_t marks);
  // A communicator over the ranks that pass the same color, ordered by key (MPI_Comm_split).
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
  // Whether an earlier error or timeout left this communicator unusable, so that every later call
  // throws (nccl aborts its communicator after its first failure, faulty(abort,INNER) models it).
  // The harness then makes a new one for the next case instead of failing every case after it.
  // Wrappers ask INNER and whatever groups they hold.
  virtual bool aborted() const { return false; }
  // Gives this communicator up at once: no wait for peers, every later call throws (nccl:
  // ncclCommAbort, where its destructor would otherwise finalize, waiting for its peers). The
  // harness calls it on every rank once any rank's communicator is aborted, so that dropping it
  // waits for no peer. Host backends have nothing to give up: a no-op.
  virtual void abort() {}
  // Where the library knows `dtype` by several names (mpi: MPI_INT64_T, MPI_LONG, MPI_LONG_LONG;
  // mpi_datatype_names), later calls of `dtype` go through `name`; "" restores the default. A
  // backend with one name per dtype takes "" only (Error{invalid_argument} otherwise); wrappers
  // pass it to INNER.
  virtual void use_datatype_name(DType dtype, std::string_view name);

 protected:
  [[noreturn]] void unsupported(std::string_view op) const;
};

// A backend spec parsed: "faulty(bitflip,ring(mpi))" -> {name "faulty", args {"bitflip", "ring(mpi)"}}.
struct BackendSpec {
  std::string name;
  std::vector<std::string> args;
};
// The deepest nesting of parentheses a spec may have: "ring(mpi)" is 1, "faulty(delay(20),ring(mpi))"
// is 2. Real stacks nest a handful of wrappers; 64 leaves ample room for generated ones while
// keeping make_communicator()'s recursion (one factory per level) shallow and its parsing linear.
inline constexpr int kMaxBackendSpecDepth = 64;
// Malformed or nested deeper than kMaxBackendSpecDepth: Error{invalid_argument}, one line.
BackendSpec parse_backend_spec(std::string_view spec);

using BackendFactory =
    std::function<std::unique_ptr<Communicator>(const BackendSpec& spec, const CommOptions& options)>;

struct BackendInfo {
  std::string name;
  std::string usage;  // "ring(INNER)"
  std::string summary;
};

// Backends register themselves at their definition site with DTS_REGISTER_BACKEND.
bool register_backend(BackendInfo info, BackendFactory factory);
std::vector<BackendInfo> registered_backends();

// Builds a communicator over all ranks of the job from a spec such as "mpi", "ring(mpi)",
// "faulty(bitflip,mpi)". Unknown names or malformed specs: Error{invalid_argument}.
std::unique_ptr<Communicator> make_communicator(std::string_view spec, const CommOptions& options = {});

#define DTS_REGISTER_CONCAT_INNER(a, b) a##b
#define DTS_REGISTER_CONCAT(a, b) DTS_REGISTER_CONCAT_INNER(a, b)
#define DTS_REGISTER_BACKEND(NAME, USAGE, SUMMARY, FACTORY)                              \
  static const bool DTS_REGISTER_CONCAT(dts_backend_registered_, __LINE__) =            \
      ::dts::register_backend(::dts::BackendInfo{NAME, USAGE, SUMMARY}, FACTORY)

}  // namespace dts

// NCCL backend. Every NCCL call goes through check(): a nonblocking call that answers
// ncclInProgress is polled with ncclCommGetAsyncError until it settles, within the timeout, and a
// failure is translated with NCCL's own text and file:line. Version gates: nccl_features.h only.
#include "comm/nccl/nccl_communicator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "comm/mpi_support.h"
#include "comm/nccl/nccl_features.h"

// In-place all_to_all and send_recv stage their input with the stream-ordered allocator.
static_assert(CUDART_VERSION >= 11020, "the nccl backend needs CUDA 11.2 or newer (cudaMallocAsync)");

namespace dts {

namespace {

using Clock = std::chrono::steady_clock;

int64_t bytes_of(size_t count, DType dtype) { return static_cast<int64_t>(count * size_of(dtype)); }

// "ncclAllReduce" from the text of the call "ncclAllReduce(in, out, ...)".
std::string name_of(std::string_view call) { return std::string(call.substr(0, call.find('('))); }

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

double wait_limit(const CommOptions& options) {
  return options.timeout_seconds > 0 ? options.timeout_seconds : kNcclDefaultTimeoutSeconds;
}

Clock::time_point deadline_after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

void check_cuda(cudaError_t result, std::string_view call,
                std::source_location where = std::source_location::current()) {
  if (result == cudaSuccess) return;
  throw Error(Error::Kind::backend, "nccl: " + name_of(call) + " failed: " + cudaGetErrorString(result), where);
}
#define DTS_CUDA_CHECK(call) check_cuda((call), #call)

#define DTS_MPI_CHECK(call) check_mpi((call), "nccl: " + name_of(#call))

// True once an event or stream query reports its work done, false while it is not ready: that
// answer is no error, and is cleared so that cudaGetLastError stays clean for the caller.
bool reached(cudaError_t state, std::string_view what, std::source_location where) {
  if (state == cudaSuccess) return true;
  if (state != cudaErrorNotReady) check_cuda(state, what, where);
  cudaGetLastError();
  return false;
}

bool in_progress(ncclResult_t result) {
#if DTS_NCCL_HAS_NONBLOCKING
  return result == ncclInProgress;
#else
  (void)result;
  return false;
#endif
}

// NCCL's text for `result`, with the detail NCCL kept of the last error, on one line.
std::string describe(ncclResult_t result, ncclComm_t comm) {
  std::string text = ncclGetErrorString(result);
#if DTS_NCCL_HAS_GET_LAST_ERROR
  const char* last = ncclGetLastError(comm);
  std::string detail = last != nullptr ? last : "";
  std::replace(detail.begin(), detail.end(), '\n', ' ');
  while (!detail.empty() && detail.back() == ' ') detail.pop_back();
  if (!detail.empty()) text += ": " + detail;
#else
  (void)comm;
#endif
  return text;
}

// Whether the communicator is still usable after a call failed with `result`. A nonblocking
// communicator (2.14 on, the only kind this backend makes there) keeps any error as its state, and
// NCCL refuses every later call on it ("Attempt to use communicator before the previous operation
// returned ncclSuccess", seen on NCCL 2.28.9 after an invalid argument), so every error breaks it.
// A blocking one is unharmed by an invalid argument or usage, which had no effect.
bool breaks_communicator(ncclResult_t result) {
#if DTS_NCCL_HAS_NONBLOCKING
  (void)result;
  return true;
#else
  return result != ncclInvalidArgument && result != ncclInvalidUsage;
#endif
}

// Polls a nonblocking communicator whose call answered ncclInProgress until the call settles;
// false if it has not by `deadline`. NCCL takes no other call on it before then.
bool settle(ncclComm_t comm, ncclResult_t& result, Clock::time_point deadline) {
  while (in_progress(result)) {
    if (Clock::now() > deadline) return false;
    std::this_thread::yield();
    const ncclResult_t query = ncclCommGetAsyncError(comm, &result);
    if (query != ncclSuccess) result = query;
  }
  return true;
}

// For calls outside a communicator's life: ncclGetUniqueId, and queries of a ready communicator.
void check_plain(ncclResult_t result, std::string_view call,
                 std::source_location where = std::source_location::current()) {
  if (result != ncclSuccess) {
    throw Error(Error::Kind::backend, "nccl: " + name_of(call) + " failed: " + describe(result, nullptr), where);
  }
}

// For a communicator being created (init, split), not yet owned by an NcclCommunicator: settles
// the call, and on failure aborts `comm`, NCCL's way to release one whose creation failed.
void check_new(ncclComm_t comm, ncclResult_t result, std::string_view call, double seconds,
               std::source_location where = std::source_location::current()) {
  if (comm != nullptr && !settle(comm, result, deadline_after(seconds))) {
    ncclCommAbort(comm);
    throw Error(Error::Kind::timeout,
                "nccl: " + name_of(call) + " did not complete within " + seconds_text(seconds) +
                    " s; communicator aborted",
                where);
  }
  if (result == ncclSuccess) return;
  const std::string text = describe(result, comm);
  if (comm != nullptr) ncclCommAbort(comm);
  throw Error(Error::Kind::backend, "nccl: " + name_of(call) + " failed: " + text, where);
}

// Refuses, as a SKIP, what nccl.h had but the library that runs is too old for. These two serve
// the gates of nccl_features.h, so a build may use either alone.
[[maybe_unused]] void require_library(int library, int first, std::string_view what) {
  if (library < first) {
    throw Error(Error::Kind::unsupported, "nccl: " + std::string(what) + " needs " + nccl_version_string(first) +
                                              " or newer; this process runs " + nccl_version_string(library));
  }
}

// Refuses, as a SKIP, what the nccl.h of this build lacks.
[[maybe_unused]] Error missing_from_header(std::string_view what, std::string_view needs) {
  return Error(Error::Kind::unsupported, "nccl: " + std::string(what) + " needs " + std::string(needs) +
                                             "; this build's nccl.h is " + nccl_version_string(kNcclHeaderVersion));
}

// An MPI communicator freed at the end of the scope unless released to its owner.
class OwnedMpiComm {
 public:
  OwnedMpiComm() = default;
  OwnedMpiComm(const OwnedMpiComm&) = delete;
  OwnedMpiComm& operator=(const OwnedMpiComm&) = delete;
  ~OwnedMpiComm() {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }
  MPI_Comm* out() { return &comm_; }
  MPI_Comm get() const { return comm_; }
  MPI_Comm release() { return std::exchange(comm_, MPI_COMM_NULL); }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

// A copy of `bytes` at `source` in device scratch memory, allocated, filled and freed in the order
// of `stream`, so NCCL reads it in between and no other stream waits (cudaMalloc and cudaFree
// would synchronize the whole device).
class StagedCopy {
 public:
  StagedCopy(const void* source, size_t bytes, cudaStream_t stream) : stream_(stream) {
    DTS_CUDA_CHECK(cudaMallocAsync(&data_, bytes, stream));
    const cudaError_t copied = cudaMemcpyAsync(data_, source, bytes, cudaMemcpyDeviceToDevice, stream);
    if (copied != cudaSuccess) {
      cudaFreeAsync(data_, stream);
      check_cuda(copied, "cudaMemcpyAsync");
    }
  }
  ~StagedCopy() { cudaFreeAsync(data_, stream_); }
  StagedCopy(const StagedCopy&) = delete;
  StagedCopy& operator=(const StagedCopy&) = delete;
  const char* data() const { return static_cast<const char*>(data_); }

 private:
  cudaStream_t stream_;
  void* data_ = nullptr;
};

// Rank 0 of `mpi` makes the unique id and broadcasts it with its result, so that a failure there
// is every rank's error rather than a hang in the broadcast; then every rank joins.
ncclComm_t bootstrap(MPI_Comm mpi, double seconds) {
  int rank = 0, size = 0;
  DTS_MPI_CHECK(MPI_Comm_rank(mpi, &rank));
  DTS_MPI_CHECK(MPI_Comm_size(mpi, &size));
  struct {
    ncclResult_t result;
    ncclUniqueId id;
  } root{ncclSuccess, {}};
  if (rank == 0) root.result = ncclGetUniqueId(&root.id);
  DTS_MPI_CHECK(MPI_Bcast(&root, static_cast<int>(sizeof root), MPI_BYTE, 0, mpi));
  check_plain(root.result, "ncclGetUniqueId");
  ncclComm_t comm = nullptr;
#if DTS_NCCL_HAS_NONBLOCKING
  // Nonblocking: init and every later call return at once, so each wait can be bounded here.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t result = ncclCommInitRankConfig(&comm, size, root.id, rank, &config);
  check_new(comm, result, "ncclCommInitRankConfig", seconds);
#else
  const ncclResult_t result = ncclCommInitRank(&comm, size, root.id, rank);
  check_new(comm, result, "ncclCommInitRank", seconds);
#endif
  return comm;
}

}  // namespace

#define DTS_NCCL_CHECK(call) check((call), #call)

std::string nccl_version_string(int code) {
  // NCCL_VERSION packs 2.8 and older as X*1000 + Y*100 + Z, later releases as X*10000 + Y*100 + Z.
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? code % 10000 / 100 : code % 1000 / 100;
  return "NCCL " + std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

// Completion of operations enqueued on one of the communicator's streams, marked by an event.
class NcclCommunicator::EventWork final : public Work {
 public:
  EventWork(NcclCommunicator& comm, std::shared_ptr<CUevent_st> done) : comm_(comm), done_(std::move(done)) {}
  bool test() override {
    const auto here = std::source_location::current();
    comm_.ordered_stream();  // issues the operation if it is still posted only: an event never recorded reads done
    if (reached(cudaEventQuery(done_.get()), "cudaEventQuery", here)) return true;
    comm_.check_async("test", here);
    return false;
  }
  void wait(std::chrono::duration<double> timeout) override {
    const ObservedCall observed(comm_.observer(), ObservedOp::wait);
    comm_.ordered_stream();
    comm_.wait_until([this] { return cudaEventQuery(done_.get()); }, "wait",
                     timeout.count() > 0 ? timeout.count() : comm_.limit_seconds(), std::source_location::current());
  }

 private:
  NcclCommunicator& comm_;
  std::shared_ptr<CUevent_st> done_;
};

// Marks are events recorded on the main stream, read with cudaEventElapsedTime (milliseconds).
class NcclCommunicator::EventTimer final : public Timer {
 public:
  EventTimer(NcclCommunicator& comm, size_t marks) : comm_(comm) {
    events_.reserve(marks);
    while (events_.size() < marks) events_.push_back(make_event(cudaEventDefault));
  }
  void mark() override {
    if (marked_ == events_.size()) events_.push_back(make_event(cudaEventDefault));
    DTS_CUDA_CHECK(cudaEventRecord(events_[marked_].get(), comm_.ordered_stream()));
    ++marked_;
  }
  std::vector<double> intervals() override {
    std::vector<double> seconds;
    if (marked_ == 0) return seconds;
    {
      const ObservedCall observed(comm_.observer(), ObservedOp::wait);
      cudaEvent_t last = events_[marked_ - 1].get();
      comm_.wait_until([last] { return cudaEventQuery(last); }, "the timed loop", comm_.limit_seconds(),
                       std::source_location::current());
    }
    for (size_t i = 1; i < marked_; ++i) {
      float milliseconds = 0;
      DTS_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, events_[i - 1].get(), events_[i].get()));
      seconds.push_back(milliseconds / 1e3);
    }
    return seconds;
  }

 private:
  NcclCommunicator& comm_;
  std::vector<Event> events_;
  size_t marked_ = 0;
};

NcclCommunicator::Stream NcclCommunicator::make_stream() {
  cudaStream_t stream = nullptr;
  // Non-blocking: the legacy default stream, which other code may use, does not serialize with it.
  DTS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return Stream(stream);
}

NcclCommunicator::Event NcclCommunicator::make_event(unsigned flags) {
  cudaEvent_t event = nullptr;
  DTS_CUDA_CHECK(cudaEventCreateWithFlags(&event, flags));
  return Event(event);
}

NcclCommunicator::NcclCommunicator(MPI_Comm mpi_comm, ncclComm_t comm, const CommOptions& options,
                                   bool fp8_capable) try
    : mpi_comm_(mpi_comm),
      comm_(comm),
      options_(options),
      fp8_capable_(fp8_capable),
      stream_(make_stream()),
      side_stream_(make_stream()),
      issued_(make_event(cudaEventDisableTiming)),
      barrier_word_(Memory::device, sizeof(int32_t)) {
  check_plain(ncclCommUserRank(comm_, &rank_), "ncclCommUserRank");
  check_plain(ncclCommCount(comm_, &size_), "ncclCommCount");
  check_plain(ncclGetVersion(&library_version_), "ncclGetVersion");
  DTS_CUDA_CHECK(cudaMemsetAsync(barrier_word_.data(), 0, sizeof(int32_t), stream_.get()));
} catch (...) {
  // The members are gone; the handles handed in are still this constructor's to release.
  ncclCommAbort(comm);
  MPI_Comm_free(&mpi_comm);
}

NcclCommunicator::~NcclCommunicator() {
  if (!aborted_) {
#if DTS_NCCL_HAS_NONBLOCKING
    // Finalize flushes what is still queued and waits for the peers; one that never comes would
    // hold this rank forever, so the wait is bounded and ends in an abort.
    ncclResult_t result = ncclCommFinalize(comm_);
    if (settle(comm_, result, deadline_after(limit_seconds())) && result == ncclSuccess) {
      ncclCommDestroy(comm_);
    } else {
      ncclCommAbort(comm_);
    }
#else
    ncclCommDestroy(comm_);
#endif
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&mpi_comm_);
}

std::string NcclCommunicator::version() const { return nccl_version_string(library_version_); }

double NcclCommunicator::limit_seconds() const { return wait_limit(options_); }

ncclDataType_t NcclCommunicator::nccl_type(DType dtype) const {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::f16: return ncclFloat16;
    case DType::bf16:
#if DTS_NCCL_HAS_BF16
      require_library(library_version_, DTS_NCCL_BF16_SINCE, "bf16");
      return ncclBfloat16;
#else
      throw missing_from_header("bf16", "NCCL 2.10 and CUDA 11");
#endif
    case DType::i8: return ncclInt8;
    case DType::u8: return ncclUint8;
    case DType::i32: return ncclInt32;
    case DType::u32: return ncclUint32;
    case DType::i64: return ncclInt64;
    case DType::u64: return ncclUint64;
    case DType::f8e4m3:
    case DType::f8e5m2:
#if DTS_NCCL_HAS_FP8
      require_library(library_version_, DTS_NCCL_FP8_SINCE, name(dtype));
      if (!fp8_capable_) {
        throw Error(Error::Kind::unsupported, "nccl: " + std::string(name(dtype)) +
                                                  " needs compute capability 9.0 (sm_90) or newer on every rank; "
                                                  "NCCL refuses fp8 below it");
      }
      return dtype == DType::f8e4m3 ? ncclFloat8e4m3 : ncclFloat8e5m2;
#else
      throw missing_from_header(name(dtype), "NCCL 2.24 and CUDA 11.8");
#endif
  }
  throw Error(Error::Kind::invalid_argument, "nccl: no such dtype (" + std::to_string(static_cast<int>(dtype)) + ")");
}

ncclRedOp_t NcclCommunicator::nccl_op(ReduceOp op, DType dtype) const {
  // NCCL answers avg on fp8 with ncclInvalidArgument (seen on NCCL 2.28.9, H200), which would
  // also break the communicator (breaks_communicator): refused here, as a SKIP, before the call.
  if (op == ReduceOp::avg && (dtype == DType::f8e4m3 || dtype == DType::f8e5m2)) {
    throw Error(Error::Kind::unsupported, "nccl: avg on " + std::string(name(dtype)) +
                                              " is refused by NCCL (invalid argument; seen on NCCL 2.28.9)");
  }
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::prod: return ncclProd;
    case ReduceOp::min: return ncclMin;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::avg:
#if DTS_NCCL_HAS_AVG
      require_library(library_version_, DTS_NCCL_AVG_SINCE, "avg");
      return ncclAvg;
#else
      throw missing_from_header("avg", "NCCL 2.10");
#endif
  }
  throw Error(Error::Kind::invalid_argument, "nccl: no such reduce op (" + std::to_string(static_cast<int>(op)) + ")");
}

ncclComm_t NcclCommunicator::live() const {
  if (aborted_) {
    throw Error(Error::Kind::backend, "nccl: the communicator was aborted after an earlier error or timeout");
  }
  return comm_;
}

// The main stream, made to wait first for the last all_reduce_async (whose Work may be gone).
cudaStream_t NcclCommunicator::ordered_stream() {
  if (side_done_) {
    DTS_CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), side_done_.get(), 0));
    side_done_.reset();
  }
  if (!posted_.empty()) {
    // Everything posted since the last call, as one group: a receive and the send that feeds it
    // (from a peer, or from this rank itself) then progress together instead of waiting in turn.
    const std::vector<PostedP2p> group = std::move(posted_);
    posted_.clear();
    const ncclComm_t comm = live();
    grouped([&] {
      ncclResult_t result = ncclSuccess;
      for (size_t i = 0; i < group.size() && result == ncclSuccess; ++i) {
        const PostedP2p& p = group[i];
        result = p.send ? ncclSend(p.buffer, p.count, p.type, p.peer, comm, stream_.get())
                        : ncclRecv(const_cast<void*>(p.buffer), p.count, p.type, p.peer, comm, stream_.get());
      }
      return result;
    });
    for (const PostedP2p& p : group) DTS_CUDA_CHECK(cudaEventRecord(p.done.get(), stream_.get()));
  }
  return stream_.get();
}

std::shared_ptr<CUevent_st> NcclCommunicator::post(bool send, const void* buffer, size_t count, ncclDataType_t type,
                                                   int peer) {
  std::shared_ptr<CUevent_st> done = make_event(cudaEventDisableTiming);
  posted_.push_back(PostedP2p{send, buffer, count, type, peer, done});
  return done;
}

std::shared_ptr<CUevent_st> NcclCommunicator::record(cudaStream_t stream) {
  Event event = make_event(cudaEventDisableTiming);
  DTS_CUDA_CHECK(cudaEventRecord(event.get(), stream));
  return event;
}

void NcclCommunicator::abort() {
  if (aborted_) return;
  ncclCommAbort(comm_);
  aborted_ = true;
}

void NcclCommunicator::check(ncclResult_t result, std::string_view call, std::source_location where) {
  if (!settle(comm_, result, deadline_after(limit_seconds()))) timed_out(name_of(call), limit_seconds(), where);
  if (result != ncclSuccess) fail(result, name_of(call), where);
}

void NcclCommunicator::fail(ncclResult_t result, std::string_view what, std::source_location where) {
  std::string text = "nccl: " + std::string(what) + " failed: " + describe(result, comm_);
  if (breaks_communicator(result)) {
    abort();
    text += "; communicator aborted";
  }
  throw Error(Error::Kind::backend, text, where);
}

void NcclCommunicator::timed_out(std::string_view what, double seconds, std::source_location where) {
  abort();
  throw Error(Error::Kind::timeout,
              "nccl: " + std::string(what) + " did not complete within " + seconds_text(seconds) +
                  " s; communicator aborted",
              where);
}

// An error of the communicator's own threads or kernels (a peer gone, a network failure) shows
// here, not in the result of the call that enqueued the work.
void NcclCommunicator::check_async(std::string_view what, std::source_location where) {
  ncclResult_t state = ncclSuccess;
  check(ncclCommGetAsyncError(live(), &state), "ncclCommGetAsyncError", where);
  if (state != ncclSuccess && !in_progress(state)) fail(state, what, where);
}

template <class Probe>
void NcclCommunicator::wait_until(Probe probe, std::string_view what, double seconds, std::source_location where) {
  const Clock::time_point deadline = deadline_after(seconds);
  while (!reached(probe(), what, where)) {
    check_async(what, where);
    if (Clock::now() > deadline) timed_out(what, seconds, where);
    std::this_thread::yield();
  }
}

void NcclCommunicator::drain(std::string_view what, std::source_location where) {
  wait_until(
      [this] {
        const cudaError_t main = cudaStreamQuery(stream_.get());
        return main != cudaSuccess ? main : cudaStreamQuery(side_stream_.get());
      },
      what, limit_seconds(), where);
}

// `calls` issues the group's sends and receives and returns the first failure, or ncclSuccess.
// The group is ended before anything is reported: one left open would take in later calls.
template <class Calls>
void NcclCommunicator::grouped(Calls calls, std::source_location where) {
  check(ncclGroupStart(), "ncclGroupStart", where);
  const ncclResult_t queued = calls();
  check(ncclGroupEnd(), "ncclGroupEnd", where);
  check(queued, "ncclSend/ncclRecv", where);
}

void NcclCommunicator::all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) {
  const ncclDataType_t type = nccl_type(dtype);
  const ncclRedOp_t reduction = nccl_op(op, dtype);
  const ObservedCall observed(observer(), ObservedOp::all_reduce);
  count_opaque(observer());
  if (count == 0) return;
  DTS_NCCL_CHECK(ncclAllReduce(in, out, count, type, reduction, live(), ordered_stream()));
}

void NcclCommunicator::reduce_scatter(const void* in, void* out, size_t out_count, DType dtype, ReduceOp op) {
  const ncclDataType_t type = nccl_type(dtype);
  const ncclRedOp_t reduction = nccl_op(op, dtype);
  const ObservedCall observed(observer(), ObservedOp::reduce_scatter);
  count_opaque(observer());
  if (out_count == 0) return;
  DTS_NCCL_CHECK(ncclReduceScatter(in, out, out_count, type, reduction, live(), ordered_stream()));
}

void NcclCommunicator::all_gather(const void* in, void* out, size_t in_count, DType dtype) {
  const ncclDataType_t type = nccl_type(dtype);
  const ObservedCall observed(observer(), ObservedOp::all_gather);
  count_opaque(observer());
  if (in_count == 0) return;
  DTS_NCCL_CHECK(ncclAllGather(in, out, in_count, type, live(), ordered_stream()));
}

void NcclCommunicator::broadcast(const void* in, void* out, size_t count, DType dtype, int root) {
  const ncclDataType_t type = nccl_type(dtype);
  const ObservedCall observed(observer(), ObservedOp::broadcast);
  count_opaque(observer());
  if (count == 0) return;
  // NCCL reads the send buffer on the root only; elsewhere `in` may be anything, so pass `out`.
  const void* source = rank_ == root ? in : out;
  DTS_NCCL_CHECK(ncclBroadcast(source, out, count, type, root, live(), ordered_stream()));
}

void NcclCommunicator::reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op, int root) {
  const ncclDataType_t type = nccl_type(dtype);
  const ncclRedOp_t reduction = nccl_op(op, dtype);
  const ObservedCall observed(observer(), ObservedOp::reduce);
  count_opaque(observer());
  if (count == 0) return;
  // NCCL writes the receive buffer on the root only, but takes one everywhere: a rank that has
  // none passes `in`, which stays untouched.
  void* target = out != nullptr ? out : const_cast<void*>(in);
  DTS_NCCL_CHECK(ncclReduce(in, target, count, type, reduction, root, live(), ordered_stream()));
}

void NcclCommunicator::all_to_all(const void* in, void* out, size_t count_per_peer, DType dtype) {
  const ncclDataType_t type = nccl_type(dtype);
  const ObservedCall observed(observer(), ObservedOp::all_to_all);
  count_opaque(observer());
  if (count_per_peer == 0) return;
  const ncclComm_t comm = live();
  cudaStream_t stream = ordered_stream();
  const size_t block = count_per_peer * size_of(dtype);
  // In place, a block received could overwrite one not yet sent: send from a copy.
  std::optional<StagedCopy> staged;
  if (in == out) staged.emplace(in, block * static_cast<size_t>(size_), stream);
  const char* source = staged ? staged->data() : static_cast<const char*>(in);
  char* target = static_cast<char*>(out);
  grouped([&] {
    ncclResult_t result = ncclSuccess;
    for (int peer = 0; peer < size_ && result == ncclSuccess; ++peer) {
      const size_t offset = static_cast<size_t>(peer) * block;
      result = ncclSend(source + offset, count_per_peer, type, peer, comm, stream);
      if (result == ncclSuccess) result = ncclRecv(target + offset, count_per_peer, type, peer, comm, stream);
    }
    return result;
  });
}

void NcclCommunicator::send(const void* in, size_t count, DType dtype, int peer) {
  const ncclDataType_t type = nccl_type(dtype);
  const ObservedCall observed(observer(), ObservedOp::send);
  count_sent(observer(), bytes_of(count, dtype));
  if (count == 0) return;
  post(true, in, count, type, peer);
  ordered_stream();  // with the isend/irecv posted before it, as one group
}

void NcclCommunicator::recv(void* out, size_t count, DType dtype, int peer) {
  const ncclDataType_t type = nccl_type(dtype);
  const ObservedCall observed(observer(), ObservedOp::recv);
  count_received(observer(), bytes_of(count, dtype));
  if (count == 0) return;
  post(false, out, count, type, peer);
  ordered_stream();
}

void NcclCommunicator::send_recv(const void* in, int send_peer, void* out, int recv_peer, size_t count,
                                 DType dtype) {
  const ncclDataType_t type = nccl_type(dtype);
  const ObservedCall observed(observer(), ObservedOp::send_recv);
  count_sent(observer(), bytes_of(count, dtype));
  count_received(observer(), bytes_of(count, dtype));
  if (count == 0) return;
  const ncclComm_t comm = live();
  cudaStream_t stream = ordered_stream();
  // In place, the receive could land before the send has read the buffer: send from a copy.
  std::optional<StagedCopy> staged;
  if (in == out) staged.emplace(in, count * size_of(dtype), stream);
  const void* source = staged ? staged->data() : in;
  grouped([&] {
    const ncclResult_t result = ncclSend(source, count, type, send_peer, comm, stream);
    return result == ncclSuccess ? ncclRecv(out, count, type, recv_peer, comm, stream) : result;
  });
}

std::unique_ptr<Work> NcclCommunicator::isend(const void* in, size_t count, DType dtype, int peer) {
  const ncclDataType_t type = nccl_type(dtype);
  const ObservedCall observed(observer(), ObservedOp::isend);
  count_sent(observer(), bytes_of(count, dtype));
  if (count == 0) return std::make_unique<CompletedWork>();
  return std::make_unique<EventWork>(*this, post(true, in, count, type, peer));
}

std::unique_ptr<Work> NcclCommunicator::irecv(void* out, size_t count, DType dtype, int peer) {
  const ncclDataType_t type = nccl_type(dtype);
  const ObservedCall observed(observer(), ObservedOp::irecv);
  count_received(observer(), bytes_of(count, dtype));
  if (count == 0) return std::make_unique<CompletedWork>();
  return std::make_unique<EventWork>(*this, post(false, out, count, type, peer));
}

std::unique_ptr<Work> NcclCommunicator::all_reduce_async(const void* in, void* out, size_t count, DType dtype,
                                                         ReduceOp op) {
  const ncclDataType_t type = nccl_type(dtype);
  const ncclRedOp_t reduction = nccl_op(op, dtype);
  const ObservedCall observed(observer(), ObservedOp::all_reduce_async);
  count_opaque(observer());
  if (count == 0) return std::make_unique<CompletedWork>();
  const ncclComm_t comm = live();
  // The side stream starts where the main stream is now, so the reduction sees earlier results.
  DTS_CUDA_CHECK(cudaEventRecord(issued_.get(), ordered_stream()));
  DTS_CUDA_CHECK(cudaStreamWaitEvent(side_stream_.get(), issued_.get(), 0));
  DTS_NCCL_CHECK(ncclAllReduce(in, out, count, type, reduction, comm, side_stream_.get()));
  side_done_ = record(side_stream_.get());
  return std::make_unique<EventWork>(*this, side_done_);
}

void NcclCommunicator::barrier() {
  const ObservedCall observed(observer(), ObservedOp::barrier);
  // NCCL has no barrier: a one-word all-reduce that every rank must join, waited for.
  DTS_NCCL_CHECK(ncclAllReduce(barrier_word_.data(), barrier_word_.data(), 1, ncclInt32, ncclSum, live(),
                               ordered_stream()));
  drain("barrier", std::source_location::current());
}

void NcclCommunicator::synchronize() {
  const ObservedCall observed(observer(), ObservedOp::wait);
  ordered_stream();  // what isend/irecv posted is issued, then waited for with the rest
  drain("synchronize", std::source_location::current());
}

std::unique_ptr<Timer> NcclCommunicator::timer(size_t marks) { return std::make_unique<EventTimer>(*this, marks); }

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key) {
  if (color < 0) {
    throw Error(Error::Kind::invalid_argument,
                "nccl: split color must be >= 0, got " + std::to_string(color) + " (every rank joins a group)");
  }
  // Each communicator keeps an MPI twin over the same ranks. MPI_Comm_split orders a group by key,
  // then by parent rank, as ncclCommSplit does, so the twin's ranks are the NCCL ranks.
  OwnedMpiComm twin;
  DTS_MPI_CHECK(MPI_Comm_split(mpi_comm_, color, key, twin.out()));
#if DTS_NCCL_HAS_COMM_SPLIT
  // A null config: the child inherits this communicator's, nonblocking. The split runs as work of
  // this communicator, settled by check(); the child's own state is settled next.
  // NCCL runs the split as a job of the parent: the call may return (ncclSuccess or
  // ncclInProgress) before the job ends, and NCCL publishes the child only when it does, from its
  // own thread. So the parent is polled until the split is over and the child is there (seen on
  // NCCL 2.28.9: the child still null after the call returned), then the child is settled.
  const auto where = std::source_location::current();
  const ncclComm_t parent = live();
  ncclComm_t child = nullptr;
  const auto published = [&child] { return std::atomic_ref<ncclComm_t>(child).load(std::memory_order_acquire); };
  ncclResult_t result = ncclCommSplit(parent, color, key, &child, nullptr);
  const Clock::time_point deadline = deadline_after(limit_seconds());
  while (result == ncclSuccess || in_progress(result)) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t query = ncclCommGetAsyncError(parent, &state);
    result = query != ncclSuccess ? query : state;
    if (result == ncclSuccess && published() != nullptr) break;
    if (Clock::now() > deadline) timed_out("ncclCommSplit", limit_seconds(), where);
    std::this_thread::yield();
  }
  if (result != ncclSuccess) fail(result, "ncclCommSplit", where);
  check_new(published(), ncclInProgress, "ncclCommSplit", limit_seconds());
#else
  const ncclComm_t child = bootstrap(twin.get(), limit_seconds());
#endif
  // The parent's fp8 verdict holds: its devices include the child's.
  return std::make_unique<NcclCommunicator>(twin.release(), child, options_, fp8_capable_);
}

namespace {

std::unique_ptr<Communicator> make_nccl(const BackendSpec& spec, const CommOptions& options) {
  if (!spec.args.empty()) throw Error(Error::Kind::invalid_argument, "backend nccl takes no arguments");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) throw Error(Error::Kind::invalid_argument, "backend nccl needs MPI_Init first");
  int world_rank = 0;
  DTS_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
  // One GPU per rank: the ranks of a node take its devices in turn.
  OwnedMpiComm node;
  DTS_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, node.out()));
  int local_rank = 0, node_ranks = 0;
  DTS_MPI_CHECK(MPI_Comm_rank(node.get(), &local_rank));
  DTS_MPI_CHECK(MPI_Comm_size(node.get(), &node_ranks));
  const int devices = cuda_device_count();
  const int device = devices > 0 ? local_rank % devices : -1;
  // NCCL refuses two ranks on one GPU, at its init and with its own words; more ranks on a node
  // than it has GPUs is the user's layout, said before NCCL is called. kShared marks such a node.
  constexpr int kShared = -1;
  const bool shared = devices > 0 && node_ranks > devices;
  // This rank's device and its compute capability (major); 0 where it has none it can use.
  int major = 0;
  cudaError_t refused = cudaSuccess;
  if (device >= 0 && !shared) {
    refused = cudaSetDevice(device);
    if (refused == cudaSuccess) refused = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    if (refused != cudaSuccess) {
      major = 0;
      cudaGetLastError();
    }
  }
  // Every rank learns the others' verdict before the first collective that a rank without a
  // device would not join: all refuse alike (a SKIP), and none has called NCCL. The same
  // reduction says whether fp8 can run on every device.
  struct {
    int major;
    int rank;
  } mine{shared ? kShared : major, world_rank}, least{0, 0};
  DTS_MPI_CHECK(MPI_Allreduce(&mine, &least, 1, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD));
  if (least.major == kShared) {
    throw Error(Error::Kind::invalid_argument,
                "nccl: rank " + std::to_string(least.rank) + "'s node runs more ranks than it has GPUs, and NCCL " +
                    "needs one GPU per rank; ranks that share a GPU run with --backend 'staged(mpi)'");
  }
  if (least.major == 0) {
    const std::string why =
        device < 0   ? "no CUDA device visible to this rank (no GPU, no driver, or CUDA_VISIBLE_DEVICES hides them)"
        : major == 0 ? "CUDA device " + std::to_string(device) + " is unusable on this rank: " +
                           cudaGetErrorString(refused)
                     : "rank " + std::to_string(least.rank) + " has no usable CUDA device";
    throw Error(Error::Kind::unsupported, "nccl: " + why + "; the backend needs one GPU per rank");
  }
  OwnedMpiComm world;
  DTS_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, world.out()));
  DTS_MPI_CHECK(MPI_Comm_set_errhandler(world.get(), MPI_ERRORS_RETURN));
  const ncclComm_t comm = bootstrap(world.get(), wait_limit(options));
  return std::make_unique<NcclCommunicator>(world.release(), comm, options, least.major >= 9);
}

}  // namespace

DTS_REGISTER_BACKEND(
    "nccl", "nccl",
    "NCCL collectives and point-to-point on CUDA device memory, bootstrapped over MPI (one GPU per rank)", make_nccl);

}  // namespace dts

// The `nccl` backend: NCCL collectives and point-to-point on CUDA device memory, one GPU per rank,
// bootstrapped over MPI. Calls return once enqueued on the communicator's stream; synchronize()
// (or a Work, or a Timer) waits, by polling, so a hang is reported as Error{timeout}, not stuck.
#pragma once
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <memory>
#include <source_location>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "core/buffer.h"

namespace dts {

// The bound on every wait when CommOptions::timeout_seconds is 0: a device backend cannot tell a
// slow peer from a dead one, so it never waits without limit. Ample for NCCL's init and for any
// one collective of a benchmark.
inline constexpr double kNcclDefaultTimeoutSeconds = 300;

// Errors: every NCCL result is translated with ncclGetErrorString and ncclGetLastError, every CUDA
// error with cudaGetErrorString. A timeout, or an error that leaves the communicator broken (all
// but an invalid argument or usage, which had no effect), aborts it: later calls fail at once.
// Point-to-point: NCCL runs the operations of a communicator in the order they were issued, and a
// receive blocks its stream until its send arrives, so a ring of ranks that each irecv, then
// isend, would wait on itself, and so would a rank that receives from itself. isend and irecv
// therefore only post their operation; the next call of any other kind (send, recv, a collective,
// a Work's wait or test, synchronize) issues everything posted, with a send or recv of its own,
// as one NCCL group, in which the operations progress together (MPI's nonblocking semantics).
// A Work or Timer must not outlive its communicator.
class NcclCommunicator final : public Communicator {
 public:
  // Takes ownership of `mpi_comm` and `comm`, which hold the same ranks in the same order. The
  // calling thread's CUDA device is the one `comm` was created on. `fp8_capable`: every rank's
  // device is sm_90 or newer, as the caller agreed with the others (NCCL refuses fp8 below it).
  // Local work only: a rank that fails here leaves no peer waiting in a collective.
  NcclCommunicator(MPI_Comm mpi_comm, ncclComm_t comm, const CommOptions& options, bool fp8_capable);
  ~NcclCommunicator() override;

  std::string_view backend() const override { return "nccl"; }
  std::string version() const override;  // of the library that runs: "NCCL 2.28.9"
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Memory memory() const override { return Memory::device; }
  // After a timeout or an error that breaks it; every later call throws.
  bool aborted() const override { return aborted_; }
  // ncclCommAbort, once: the destructor then frees only the MPI communicator, waiting for no peer.
  void abort() override;

  void all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* in, void* out, size_t out_count, DType dtype, ReduceOp op) override;
  void all_gather(const void* in, void* out, size_t in_count, DType dtype) override;
  void broadcast(const void* in, void* out, size_t count, DType dtype, int root) override;
  void reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op, int root) override;
  void all_to_all(const void* in, void* out, size_t count_per_peer, DType dtype) override;
  void send(const void* in, size_t count, DType dtype, int peer) override;
  void recv(void* out, size_t count, DType dtype, int peer) override;
  void send_recv(const void* in, int send_peer, void* out, int recv_peer, size_t count, DType dtype) override;
  // The Work's wait(0) waits up to the communicator's timeout.
  std::unique_ptr<Work> isend(const void* in, size_t count, DType dtype, int peer) override;
  std::unique_ptr<Work> irecv(void* out, size_t count, DType dtype, int peer) override;
  // Runs on a side stream that starts after the work issued before it; the next call on the main
  // stream starts after it.
  std::unique_ptr<Work> all_reduce_async(const void* in, void* out, size_t count, DType dtype,
                                         ReduceOp op) override;
  void barrier() override;
  void synchronize() override;  // both streams
  std::unique_ptr<Timer> timer(size_t marks) override;
  // A negative color is refused, as MPI_Comm_split refuses it: no rank is left out.
  std::unique_ptr<Communicator> split(int color, int key) override;

  ncclComm_t native() const { return comm_; }
  // The main stream, for callers that order their own kernels with the communicator's work.
  cudaStream_t stream() const { return stream_.get(); }

 private:
  class EventWork;
  class EventTimer;
  struct StreamDestroyer {
    void operator()(cudaStream_t stream) const { cudaStreamDestroy(stream); }
  };
  struct EventDestroyer {
    void operator()(cudaEvent_t event) const { cudaEventDestroy(event); }
  };
  using Stream = std::unique_ptr<CUstream_st, StreamDestroyer>;
  using Event = std::unique_ptr<CUevent_st, EventDestroyer>;

  static Stream make_stream();
  static Event make_event(unsigned flags);

  OpObserver* observer() const { return options_.observer.get(); }
  double limit_seconds() const;
  ncclDataType_t nccl_type(DType dtype) const;
  ncclRedOp_t nccl_op(ReduceOp op, DType dtype) const;
  ncclComm_t live() const;
  // The main stream, after the last all_reduce_async and with the posted point-to-point issued.
  cudaStream_t ordered_stream();
  // Posts a send (or receive) for the next ordered_stream(); its event is recorded then.
  std::shared_ptr<CUevent_st> post(bool send, const void* buffer, size_t count, ncclDataType_t type, int peer);
  std::shared_ptr<CUevent_st> record(cudaStream_t stream);
  void check(ncclResult_t result, std::string_view call,
             std::source_location where = std::source_location::current());
  [[noreturn]] void fail(ncclResult_t result, std::string_view what, std::source_location where);
  [[noreturn]] void timed_out(std::string_view what, double seconds, std::source_location where);
  void check_async(std::string_view what, std::source_location where);
  template <class Probe>
  void wait_until(Probe probe, std::string_view what, double seconds, std::source_location where);
  void drain(std::string_view what, std::source_location where);
  template <class Calls>
  void grouped(Calls calls, std::source_location where = std::source_location::current());

  MPI_Comm mpi_comm_;
  ncclComm_t comm_;
  bool aborted_ = false;
  CommOptions options_;
  int rank_ = 0;
  int size_ = 1;
  int library_version_ = 0;
  bool fp8_capable_;
  Stream stream_;
  Stream side_stream_;
  Event issued_;  // the main stream's position, for the side stream to wait on
  std::shared_ptr<CUevent_st> side_done_;  // the last all_reduce_async, until the main stream waits for it
  Buffer barrier_word_;
  struct PostedP2p {
    bool send;
    const void* buffer;
    size_t count;
    ncclDataType_t type;
    int peer;
    std::shared_ptr<CUevent_st> done;
  };
  std::vector<PostedP2p> posted_;  // by isend/irecv, not yet issued
};

// "NCCL 2.28.9" for a version code as ncclGetVersion returns it (either of NCCL_VERSION's packings).
std::string nccl_version_string(int code);

}  // namespace dts

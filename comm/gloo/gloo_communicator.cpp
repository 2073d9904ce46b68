// The `gloo` backend: every collective and point-to-point operation through Gloo, the collective
// library behind PyTorch's CPU process group, on host memory over its TCP transport.
//
// Bootstrap: no Store and no service. Gloo's rendezvous (rendezvous::Context::connectFullMesh)
// has each rank publish, per peer, the address of a pair it listens on, and connect each pair to
// the address its peer published for it. Here the publishing is one MPI_Allgather over the ranks
// the harness launched (a twin communicator of MPI_COMM_WORLD, or of the parent for split), which
// every launch dtsuite supports (mpirun, Slurm) already provides; the pairs then connect over TCP.
//
// Which address a rank listens on: GLOO_SOCKET_IFNAME (PyTorch's variable: an interface name)
// where set; else loopback when every rank is on this node (MPI's shared-memory split); else the
// address this host's name resolves to, as Gloo and PyTorch do by default.
//
// What Gloo does not have is Error{unsupported} (a SKIP) with the reason: bf16 and fp8 reductions
// (Gloo has no such element type; data movement carries them as bytes), avg (Gloo has no average,
// and PyTorch's Gloo process group refuses it), and more ranks than Gloo's halving-doubling
// reduce_scatter takes at once, none.
#include <mpi.h>
#include <unistd.h>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/config.h>
#include <gloo/context.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>
#include <gloo/transport/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <atomic>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <future>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "comm/mpi_support.h"
#include "dts/config.h"

namespace dts {
namespace {

#define DTS_GLOO_MPI_CHECK(call) check_mpi((call), "gloo: bootstrap: " #call)

// A library failure as dtsuite's error, naming the operation: Gloo throws gloo::IoException for a
// lost or timed-out peer and gloo::EnforceNotMet for a refused argument (both std::exception).
// `broken` (may be null) is set when the library failed: its context is then unusable.
template <typename F>
void guarded(const char* op, F&& body, std::atomic<bool>* broken = nullptr) {
  if (broken != nullptr && broken->load()) {
    throw Error(Error::Kind::backend, std::string("gloo: ") + op + ": the Gloo context failed in an earlier call");
  }
  try {
    body();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    if (broken != nullptr) broken->store(true);
    const std::string what = e.what();
    const bool timed_out = what.find("Timed out") != std::string::npos || what.find("timed out") != std::string::npos;
    throw Error(timed_out ? Error::Kind::timeout : Error::Kind::backend, std::string("gloo: ") + op + ": " + what);
  }
}

std::chrono::milliseconds timeout_of(const CommOptions& options) {
  // No limit asked: a day, which Gloo's own clock never reaches in a run (its default is 30 s,
  // shorter than a large case's call on a slow link). The harness's watchdog bounds hangs.
  if (options.timeout_seconds <= 0) return std::chrono::hours(24);
  return std::chrono::milliseconds(static_cast<int64_t>(options.timeout_seconds * 1000.0) + 1);
}

// Gloo's element-wise reductions (gloo/math.h) of one element type, as the allreduce options'
// untyped function and the typed one its older algorithms take.
using UntypedReduce = void (*)(void*, const void*, const void*, size_t);
template <typename T>
gloo::AllreduceOptions::Func untyped(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return static_cast<UntypedReduce>(&gloo::sum<T>);
    case ReduceOp::prod: return static_cast<UntypedReduce>(&gloo::product<T>);
    case ReduceOp::min: return static_cast<UntypedReduce>(&gloo::min<T>);
    case ReduceOp::max: return static_cast<UntypedReduce>(&gloo::max<T>);
    case ReduceOp::avg: break;
  }
  return nullptr;
}

template <typename T>
const gloo::ReductionFunction<T>* typed(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return gloo::ReductionFunction<T>::sum;
    case ReduceOp::prod: return gloo::ReductionFunction<T>::product;
    case ReduceOp::min: return gloo::ReductionFunction<T>::min;
    case ReduceOp::max: return gloo::ReductionFunction<T>::max;
    case ReduceOp::avg: break;
  }
  return nullptr;
}

// Calls f.template operator()<T>() with the Gloo element type of `dtype`; bf16 and fp8 have none.
template <typename F>
void with_gloo_type(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::f32: f.template operator()<float>(); return;
    case DType::f64: f.template operator()<double>(); return;
    case DType::f16: f.template operator()<gloo::float16>(); return;
    case DType::i8: f.template operator()<int8_t>(); return;
    case DType::u8: f.template operator()<uint8_t>(); return;
    case DType::i32: f.template operator()<int32_t>(); return;
    case DType::u32: f.template operator()<uint32_t>(); return;
    case DType::i64: f.template operator()<int64_t>(); return;
    case DType::u64: f.template operator()<uint64_t>(); return;
    case DType::bf16:
    case DType::f8e4m3:
    case DType::f8e5m2: break;
  }
  throw Error(Error::Kind::unsupported, std::string("gloo: ") + op + " of " + std::string(name(dtype)) +
                                            ": Gloo has no " + std::string(name(dtype)) +
                                            " element type to reduce (its types: float, double, float16 and the "
                                            "8- to 64-bit integers)");
}

void refuse_avg(ReduceOp op, const char* what) {
  if (op != ReduceOp::avg) return;
  throw Error(Error::Kind::unsupported, std::string("gloo: ") + what +
                                            " with avg: Gloo has no average (PyTorch's Gloo process group refuses "
                                            "ReduceOp.AVG too)");
}

// The Gloo context over the ranks of `mpi`: each rank's pair addresses, one per peer, exchanged
// with MPI_Allgather, then every pair connected (what rendezvous::Context::connectFullMesh does
// through a Store).
class BootstrappedContext final : public gloo::Context {
 public:
  BootstrappedContext(MPI_Comm mpi, int my_rank, int ranks, const std::shared_ptr<gloo::transport::Device>& device,
                      std::chrono::milliseconds timeout)
      : gloo::Context(my_rank, ranks) {
    device_ = device;
    setTimeout(timeout);
    auto transport = device->createContext(rank, size);
    transport->setTimeout(timeout);
    // Ranks of this node before this one: Gloo's pairs are told their local rank.
    int local_rank = 0;
    {
      MPI_Comm node = MPI_COMM_NULL;
      DTS_GLOO_MPI_CHECK(MPI_Comm_split_type(mpi, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
      MPI_Comm_rank(node, &local_rank);
      MPI_Comm_free(&node);
    }
    // Every address of one transport has one size; a rank's block lists its pairs in peer order.
    std::vector<char> mine;
    int address_bytes = 0;
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      auto& pair = transport->createPair(peer);
      pair->setLocalRank(local_rank);
      const std::vector<char> bytes = pair->address().bytes();
      address_bytes = static_cast<int>(bytes.size());
      mine.insert(mine.end(), bytes.begin(), bytes.end());
    }
    if (size > 1) {
      int most = 0;
      DTS_GLOO_MPI_CHECK(MPI_Allreduce(&address_bytes, &most, 1, MPI_INT, MPI_MAX, mpi));
      if (most != address_bytes) {
        throw Error(Error::Kind::backend, "gloo: bootstrap: pair addresses of " + std::to_string(address_bytes) +
                                              " and " + std::to_string(most) + " bytes: one transport, one size");
      }
      const int block = address_bytes * (size - 1);
      std::vector<char> all(static_cast<size_t>(block) * static_cast<size_t>(size));
      DTS_GLOO_MPI_CHECK(MPI_Allgather(mine.data(), block, MPI_BYTE, all.data(), block, MPI_BYTE, mpi));
      for (int peer = 0; peer < size; ++peer) {
        if (peer == rank) continue;
        // Peer `peer` lists its pairs without itself: this rank's is at index rank, less one above it.
        const int index = rank > peer ? rank - 1 : rank;
        const char* at = all.data() + static_cast<size_t>(peer) * static_cast<size_t>(block) +
                         static_cast<size_t>(index) * static_cast<size_t>(address_bytes);
        guarded("connect", [&] { transport->getPair(peer)->connect(std::vector<char>(at, at + address_bytes)); });
      }
    }
    transportContext_ = std::move(transport);
  }
};

// Gloo's slot for dtsuite's point-to-point messages: a prefix none of Gloo's collectives uses
// (gloo/types.h: 0x01..0x08), and tag 0, so that the messages of one pair arrive in order, as
// MPI's of one tag do.
constexpr uint8_t kPointToPointPrefix = 0x40;

class GlooWork final : public Work {
 public:
  explicit GlooWork(std::future<void> done) : done_(std::move(done)) {}
  bool test() override {
    if (!done_.valid()) return true;
    if (done_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return false;
    done_.get();  // rethrows the wait's error
    return true;
  }
  void wait(std::chrono::duration<double> timeout) override {
    if (!done_.valid()) return;
    if (timeout > std::chrono::duration<double>::zero() && done_.wait_for(timeout) != std::future_status::ready) {
      throw Error(Error::Kind::timeout, "gloo: a point-to-point operation did not complete within " +
                                            std::to_string(timeout.count()) + " s");
    }
    done_.get();
  }

 private:
  std::future<void> done_;
};

class GlooCommunicator final : public Communicator {
 public:
  // Takes ownership of `mpi`, the ranks' twin (freed in the destructor).
  GlooCommunicator(MPI_Comm mpi, std::shared_ptr<gloo::transport::Device> device, const CommOptions& options,
                   std::string interface_text, std::string spec, gloo::AllreduceOptions::Algorithm algorithm)
      : mpi_(mpi),
        device_(std::move(device)),
        options_(options),
        interface_text_(std::move(interface_text)),
        spec_(std::move(spec)),
        algorithm_(algorithm) {
    DTS_GLOO_MPI_CHECK(MPI_Comm_set_errhandler(mpi_, MPI_ERRORS_RETURN));
    DTS_GLOO_MPI_CHECK(MPI_Comm_rank(mpi_, &rank_));
    DTS_GLOO_MPI_CHECK(MPI_Comm_size(mpi_, &size_));
    try {
      context_ = std::make_shared<BootstrappedContext>(mpi_, rank_, size_, device_, timeout_of(options_));
    } catch (...) {
      MPI_Comm_free(&mpi_);
      throw;
    }
  }
  // Every rank finishes before any closes its sockets. Gloo's algorithms leave messages in flight
  // when their call returns (reduce_scatter's last notifications, sent and not waited for), and a
  // socket closed with unread bytes in it is reset (TCP): a peer still in its last call then
  // failed with "Connection closed by peer" (4 ranks, the last case of a sweep). The wait is
  // bounded, so that a peer that died or hangs does not hold this rank: a failed context, or
  // none that finish within the limit, closes at once.
  ~GlooCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && !broken_->load() && size_ > 1) {
      MPI_Request request = MPI_REQUEST_NULL;
      if (MPI_Ibarrier(mpi_, &request) == MPI_SUCCESS) {
        const auto deadline = std::chrono::steady_clock::now() + std::min<std::chrono::milliseconds>(
                                                                     timeout_of(options_), std::chrono::seconds(60));
        int done = 0;
        while (MPI_Test(&request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done &&
               std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        // Not done: the request is left to MPI (a peer that never arrives); freeing the
        // communicator below is still legal, MPI completes or drops it at finalize.
      }
    }
    context_.reset();
    if (!finalized && mpi_ != MPI_COMM_NULL) MPI_Comm_free(&mpi_);
  }

  std::string_view backend() const override { return spec_; }
  // "Gloo 0.5.0 git20220518.5b14351, package: libgloo-dev 0.0~git20220518.5b14351-3, transports:
  // tcp ibverbs, AVX off, MPI off, CUDA off, tcp on loopback": Gloo has no version call, and its
  // version number is the same for every snapshot, so the package's names the snapshot; the
  // build flags are its config.h's. The library is what comes before the first comma.
  std::string version() const override {
    std::string text = "Gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." + std::to_string(GLOO_VERSION_MINOR) +
                       "." + std::to_string(GLOO_VERSION_PATCH);
    if (*DTS_GLOO_SNAPSHOT) text += " " DTS_GLOO_SNAPSHOT;
    text += ", package: " DTS_GLOO_PACKAGE ", transports: tcp";
    if (GLOO_HAVE_TRANSPORT_IBVERBS) text += " ibverbs";
    text += std::string(", AVX ") + (GLOO_USE_AVX ? "on" : "off") + ", MPI " + (GLOO_USE_MPI ? "on" : "off") +
            ", CUDA " + (GLOO_USE_CUDA ? "on" : "off") + ", tcp on " + interface_text_;
    return text;
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Memory memory() const override { return Memory::host; }
  // A Gloo context whose operation failed or timed out has signalled the failure to all its
  // pairs, and every later operation on it fails: the harness makes a new one.
  bool aborted() const override { return broken_->load(); }

  void all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) override {
    refuse_avg(op, "all_reduce");
    const ObservedCall observed(observer(), ObservedOp::all_reduce);
    count_opaque(observer());
    with_gloo_type(dtype, "all_reduce", [&]<typename T>() {
      run("allreduce", [&] {
        gloo::AllreduceOptions opts(context_);
        if (in != out) opts.setInput(const_cast<T*>(static_cast<const T*>(in)), count);
        opts.setOutput(static_cast<T*>(out), count);
        opts.setReduceFunction(untyped<T>(op));
        opts.setAlgorithm(algorithm_);
        opts.setTag(next_tag());
        gloo::allreduce(opts);
      });
    });
  }

  // Gloo's reduce-scatter is its halving-doubling algorithm (gloo/reduce_scatter.h): it reduces
  // in its input buffer and leaves this rank's block at the buffer's start, so it runs on a copy.
  void reduce_scatter(const void* in, void* out, size_t out_count, DType dtype, ReduceOp op) override {
    refuse_avg(op, "reduce_scatter");
    const ObservedCall observed(observer(), ObservedOp::reduce_scatter);
    count_opaque(observer());
    if (out_count > static_cast<size_t>(std::numeric_limits<int>::max() / size_)) {
      throw Error(Error::Kind::unsupported, "gloo: reduce_scatter of " + std::to_string(out_count) +
                                                " elements per rank: Gloo counts a reduce-scatter's elements in an int");
    }
    if (out_count == 0 && size_ > 1) {
      // Not called: undefined behaviour inside Gloo. Its constructor takes the address of the
      // first element of an empty receive buffer (gloo/reduce_scatter.h, &recvBuf_[bufferOffset]
      // with no elements), which UBSan reports; a build without it passes a null pointer on.
      throw Error(Error::Kind::unsupported, "gloo: reduce_scatter of 0 elements on " + std::to_string(size_) +
                                                " ranks: Gloo's halving-doubling indexes an empty buffer "
                                                "(gloo/reduce_scatter.h, &recvBuf_[0] of no elements)");
    }
    with_gloo_type(dtype, "reduce_scatter", [&]<typename T>() {
      const size_t total = out_count * static_cast<size_t>(size_);
      std::vector<T> work(total);
      if (total > 0) std::memcpy(static_cast<void*>(work.data()), in, total * sizeof(T));
      run("reduce_scatter (halving-doubling)", [&] {
        gloo::ReduceScatterHalvingDoubling<T> algorithm(context_, {work.data()}, static_cast<int>(total),
                                                        std::vector<int>(static_cast<size_t>(size_),
                                                                         static_cast<int>(out_count)),
                                                        typed<T>(op));
        algorithm.run();
      });
      if (out_count > 0) std::memmove(out, static_cast<const void*>(work.data()), out_count * sizeof(T));
    });
  }

  void all_gather(const void* in, void* out, size_t in_count, DType dtype) override {
    const ObservedCall observed(observer(), ObservedOp::all_gather);
    count_opaque(observer());
    const size_t element = size_of(dtype);
    if (in_count == 0 && size_ > 1) {
      // Not called: the process would die. Its ring takes each step's offset modulo the output's
      // size (gloo/allgather.cc, "% outBytes"), and 0 bytes is a division by zero: SIGFPE.
      throw Error(Error::Kind::unsupported, "gloo: all_gather of 0 elements on " + std::to_string(size_) +
                                                " ranks: Gloo's allgather divides by the output's size and dies of "
                                                "SIGFPE (gloo/allgather.cc, offsets % outBytes)");
    }
    run("allgather", [&] {
      gloo::AllgatherOptions opts(context_);
      // In place (in == out + rank * in_count): no input, and Gloo takes this rank's block as it is.
      char* base = static_cast<char*>(out);
      if (in != base + static_cast<size_t>(rank_) * in_count * element) {
        opts.setInput(const_cast<char*>(static_cast<const char*>(in)), in_count * element);
      }
      opts.setOutput(base, in_count * element * static_cast<size_t>(size_));
      opts.setTag(next_tag());
      gloo::allgather(opts);
    });
  }

  void broadcast(const void* in, void* out, size_t count, DType dtype, int root) override {
    const ObservedCall observed(observer(), ObservedOp::broadcast);
    count_opaque(observer());
    const size_t bytes = count * size_of(dtype);
    run("broadcast", [&] {
      gloo::BroadcastOptions opts(context_);
      if (rank_ == root && in != out) opts.setInput(const_cast<char*>(static_cast<const char*>(in)), bytes);
      opts.setOutput(static_cast<char*>(out), bytes);
      opts.setRoot(root);
      opts.setTag(next_tag());
      gloo::broadcast(opts);
    });
  }

  void reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op, int root) override {
    refuse_avg(op, "reduce");
    const ObservedCall observed(observer(), ObservedOp::reduce);
    count_opaque(observer());
    with_gloo_type(dtype, "reduce", [&]<typename T>() {
      // Gloo reduces into every rank's output (its scratch off the root): a rank without one gets
      // its own, and a non-root's output is left undefined, as in MPI.
      std::vector<T> scratch;
      T* target = static_cast<T*>(out);
      if (target == nullptr) {
        scratch.resize(count);
        target = scratch.data();
      }
      run("reduce", [&] {
        gloo::ReduceOptions opts(context_);
        if (in != out) opts.setInput(const_cast<T*>(static_cast<const T*>(in)), count);
        opts.setOutput(target, count);
        opts.setRoot(root);
        opts.setReduceFunction(untyped<T>(op));
        opts.setTag(next_tag());
        gloo::reduce(opts);
      });
    });
  }

  void all_to_all(const void* in, void* out, size_t count_per_peer, DType dtype) override {
    const ObservedCall observed(observer(), ObservedOp::all_to_all);
    count_opaque(observer());
    const size_t bytes = count_per_peer * size_of(dtype) * static_cast<size_t>(size_);
    // In place: Gloo sends from its input while it receives into its output, so a copy goes out.
    std::vector<char> copy;
    const char* source = static_cast<const char*>(in);
    if (in == out && bytes > 0) {
      copy.assign(source, source + bytes);
      source = copy.data();
    }
    run("alltoall", [&] {
      gloo::AlltoallOptions opts(context_);
      opts.setInput(const_cast<char*>(source), bytes);
      opts.setOutput(static_cast<char*>(out), bytes);
      opts.setTag(next_tag());
      gloo::alltoall(opts);
    });
  }

  void send(const void* in, size_t count, DType dtype, int peer) override {
    check_peer(peer, "send");
    const ObservedCall observed(observer(), ObservedOp::send);
    const size_t bytes = count * size_of(dtype);
    count_sent(observer(), static_cast<int64_t>(bytes));
    run("send", [&] {
      auto buffer = context_->createUnboundBuffer(const_cast<void*>(in), bytes);
      buffer->send(peer, p2p_slot());
      buffer->waitSend(context_->getTimeout());
    });
  }

  void recv(void* out, size_t count, DType dtype, int peer) override {
    check_peer(peer, "recv");
    const ObservedCall observed(observer(), ObservedOp::recv);
    const size_t bytes = count * size_of(dtype);
    run("recv", [&] {
      auto buffer = context_->createUnboundBuffer(out, bytes);
      buffer->recv(peer, p2p_slot());
      buffer->waitRecv(context_->getTimeout());
    });
    count_received(observer(), static_cast<int64_t>(bytes));
  }

  void send_recv(const void* in, int send_peer, void* out, int recv_peer, size_t count, DType dtype) override {
    check_peer(send_peer, "send_recv");
    check_peer(recv_peer, "send_recv");
    const ObservedCall observed(observer(), ObservedOp::send_recv);
    const size_t bytes = count * size_of(dtype);
    std::vector<char> copy;
    const char* source = static_cast<const char*>(in);
    if (in == out && bytes > 0) {
      copy.assign(source, source + bytes);
      source = copy.data();
    }
    count_sent(observer(), static_cast<int64_t>(bytes));
    run("send_recv", [&] {
      auto outgoing = context_->createUnboundBuffer(const_cast<char*>(source), bytes);
      auto incoming = context_->createUnboundBuffer(out, bytes);
      incoming->recv(recv_peer, p2p_slot());
      outgoing->send(send_peer, p2p_slot());
      outgoing->waitSend(context_->getTimeout());
      incoming->waitRecv(context_->getTimeout());
    });
    count_received(observer(), static_cast<int64_t>(bytes));
  }

  // Gloo's unbound buffers have a wait and no test, and a wait that times out fails the whole
  // context: the wait runs on a thread of its own, and test() asks whether it has returned.
  std::unique_ptr<Work> isend(const void* in, size_t count, DType dtype, int peer) override {
    check_peer(peer, "isend");
    const ObservedCall observed(observer(), ObservedOp::isend);
    const size_t bytes = count * size_of(dtype);
    count_sent(observer(), static_cast<int64_t>(bytes));
    std::shared_ptr<gloo::transport::UnboundBuffer> buffer;
    run("isend", [&] {
      buffer = context_->createUnboundBuffer(const_cast<void*>(in), bytes);
      buffer->send(peer, p2p_slot());
    });
    const auto limit = context_->getTimeout();
    return std::make_unique<GlooWork>(std::async(std::launch::async, [buffer, limit, broken = broken_] {
      guarded("isend (wait)", [&] { buffer->waitSend(limit); }, broken.get());
    }));
  }

  std::unique_ptr<Work> irecv(void* out, size_t count, DType dtype, int peer) override {
    check_peer(peer, "irecv");
    const ObservedCall observed(observer(), ObservedOp::irecv);
    const size_t bytes = count * size_of(dtype);
    std::shared_ptr<gloo::transport::UnboundBuffer> buffer;
    run("irecv", [&] {
      buffer = context_->createUnboundBuffer(out, bytes);
      buffer->recv(peer, p2p_slot());
    });
    const auto limit = context_->getTimeout();
    OpObserver* seen = observer();
    return std::make_unique<GlooWork>(std::async(std::launch::async, [buffer, limit, seen, bytes, broken = broken_] {
      guarded("irecv (wait)", [&] { buffer->waitRecv(limit); }, broken.get());
      if (seen) seen->bytes_received.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
    }));
  }

  void barrier() override {
    const ObservedCall observed(observer(), ObservedOp::barrier);
    run("barrier", [&] {
      gloo::BarrierOptions opts(context_);
      opts.setTag(next_tag());
      gloo::barrier(opts);
    });
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    if (color < 0) {
      throw Error(Error::Kind::invalid_argument,
                  "gloo: split color must be >= 0, got " + std::to_string(color) + " (every rank joins a group)");
    }
    MPI_Comm twin = MPI_COMM_NULL;
    DTS_GLOO_MPI_CHECK(MPI_Comm_split(mpi_, color, key, &twin));
    return std::make_unique<GlooCommunicator>(twin, device_, options_, interface_text_, spec_, algorithm_);
  }

 private:
  OpObserver* observer() const { return options_.observer.get(); }
  // A peer Gloo can reach: another rank of the context. Gloo connects each rank to the others
  // only, and a message to itself would reach for a pair that is not there (a null pointer).
  void check_peer(int peer, const char* op) const {
    if (peer < 0 || peer >= size_) {
      throw Error(Error::Kind::invalid_argument, std::string("gloo: ") + op + " with rank " + std::to_string(peer) +
                                                     ", not a rank of this " + std::to_string(size_) + "-rank group");
    }
    if (peer == rank_) {
      throw Error(Error::Kind::unsupported, std::string("gloo: ") + op + " with this rank itself (" +
                                                std::to_string(peer) + "): Gloo has no pair from a rank to itself");
    }
  }
  // One tag per collective, alike on every rank (they call in one order): Gloo tells a call's
  // messages from the next one's by it, as PyTorch's process group does with its own counter.
  uint32_t next_tag() { return tag_++; }
  template <typename F>
  void run(const char* op, F&& body) {
    guarded(op, std::forward<F>(body), broken_.get());
  }
  static uint64_t p2p_slot() { return gloo::Slot::build(kPointToPointPrefix, 0); }

  MPI_Comm mpi_;
  std::shared_ptr<gloo::transport::Device> device_;
  CommOptions options_;
  std::string interface_text_;
  std::string spec_;
  gloo::AllreduceOptions::Algorithm algorithm_;
  std::shared_ptr<gloo::Context> context_;
  int rank_ = 0;
  int size_ = 1;
  uint32_t tag_ = 0;
  // Shared with the waits of isend and irecv, which run on threads of their own.
  std::shared_ptr<std::atomic<bool>> broken_ = std::make_shared<std::atomic<bool>>(false);
};

std::unique_ptr<Communicator> make_gloo(const BackendSpec& spec, const CommOptions& options) {
  // gloo: Gloo's default all_reduce (its ring); gloo(ring), gloo(bcube): the algorithm named.
  auto algorithm = gloo::AllreduceOptions::Algorithm::UNSPECIFIED;
  std::string name = "gloo";
  if (spec.args.size() > 1 || (spec.args.size() == 1 && spec.args[0] != "ring" && spec.args[0] != "bcube")) {
    throw Error(Error::Kind::invalid_argument,
                "backend gloo takes at most one argument, its all_reduce algorithm: gloo(ring) or gloo(bcube)");
  }
  if (spec.args.size() == 1) {
    algorithm = spec.args[0] == "ring" ? gloo::AllreduceOptions::Algorithm::RING
                                       : gloo::AllreduceOptions::Algorithm::BCUBE;
    name = "gloo(" + spec.args[0] + ")";
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) throw Error(Error::Kind::invalid_argument, "backend gloo needs MPI_Init first");
  MPI_Comm world = MPI_COMM_NULL;
  DTS_GLOO_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &world));
  int size = 1, node_size = 1, rank = 0;
  MPI_Comm_size(world, &size);
  MPI_Comm_rank(world, &rank);
  {
    MPI_Comm node = MPI_COMM_NULL;
    DTS_GLOO_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    MPI_Comm_size(node, &node_size);
    MPI_Comm_free(&node);
  }
  int one_node = node_size == size ? 1 : 0, all_one_node = 0;
  DTS_GLOO_MPI_CHECK(MPI_Allreduce(&one_node, &all_one_node, 1, MPI_INT, MPI_MIN, world));
  gloo::transport::tcp::attr attr;
  std::string text;
  if (const char* iface = std::getenv("GLOO_SOCKET_IFNAME"); iface != nullptr && *iface != '\0') {
    attr.iface = iface;
    text = std::string("interface ") + iface + " (GLOO_SOCKET_IFNAME)";
  } else if (all_one_node) {
    attr.hostname = "127.0.0.1";
    text = "loopback (every rank on one node)";
  } else {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    attr.hostname = host;
    text = std::string("the address of host name ") + host;
  }
  std::shared_ptr<gloo::transport::Device> device;
  try {
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    MPI_Comm_free(&world);
    throw Error(Error::Kind::backend, "gloo: no TCP device on " + text + ": " + e.what());
  }
  return std::make_unique<GlooCommunicator>(world, std::move(device), options, text, name, algorithm);
}

}  // namespace

DTS_REGISTER_BACKEND("gloo", "gloo, gloo(ring|bcube)",
                     "Gloo (PyTorch's CPU collectives) on host memory over its TCP transport, bootstrapped over MPI; "
                     "the argument picks its all_reduce algorithm (default: Gloo's, the ring)",
                     make_gloo);

}  // namespace dts

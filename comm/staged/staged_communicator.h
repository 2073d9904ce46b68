// The `staged(INNER)` backend: a device-memory backend made of a host-memory one. Every call
// copies its device input to host memory, calls INNER there, and copies the output back, so ranks
// that share one GPU (which NCCL refuses) run the device path over mpi, ring(mpi), faulty(...).
//
// What it times is the stack as it runs: the copies each way plus INNER's call. Its rows name the
// backend `staged(INNER)` and its version says "staged through host memory", so no reader takes
// them for a device library's figures.
//
// A call reaches device memory only through copy_host_to_device / copy_device_to_host, so it runs
// on either device kind (core/buffer.h): CUDA, and the emulated device that CI runs anywhere.
// Transparency: the whole output range is copied in before INNER runs and back after it, so bytes
// INNER leaves alone (a reduce's non-root output, a fault that drops a broadcast) stay as they
// were on the device. Input and output that overlap (in place, reduce_scatter's and all_gather's
// slices) share one host range laid out as on the device, so INNER sees the same in-place call.
#pragma once
#include <memory>
#include <string>

#include "comm/forwarding_communicator.h"
#include "core/buffer.h"

namespace dts {

class StagedCommunicator final : public ForwardingCommunicator {
 public:
  // Error{invalid_argument} when INNER takes device memory: staging is from device to host.
  explicit StagedCommunicator(std::unique_ptr<Communicator> inner);

  std::string version() const override;
  Memory memory() const override { return Memory::device; }
  bool reaches_device_by_copies() const override { return true; }

  void all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* in, void* out, size_t out_count, DType dtype, ReduceOp op) override;
  void all_gather(const void* in, void* out, size_t in_count, DType dtype) override;
  void broadcast(const void* in, void* out, size_t count, DType dtype, int root) override;
  void reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op, int root) override;
  void all_to_all(const void* in, void* out, size_t count_per_peer, DType dtype) override;
  void send(const void* in, size_t count, DType dtype, int peer) override;
  void recv(void* out, size_t count, DType dtype, int peer) override;
  void send_recv(const void* in, int send_peer, void* out, int recv_peer, size_t count, DType dtype) override;
  std::unique_ptr<Work> isend(const void* in, size_t count, DType dtype, int peer) override;
  std::unique_ptr<Work> irecv(void* out, size_t count, DType dtype, int peer) override;
  std::unique_ptr<Work> all_reduce_async(const void* in, void* out, size_t count, DType dtype,
                                         ReduceOp op) override;
  // INNER's host timer reads each call whole, copies included (every call is synchronous).

  // The host side of one call: device ranges [in, in + in_bytes) and [out, out + out_bytes) in
  // host memory (`host`, grown as needed and reused by synchronous calls).
  class Stage {
   public:
    Stage(Buffer& host, const void* in, size_t in_bytes, void* out, size_t out_bytes);
    const void* in() const { return in_; }
    void* out() const { return out_; }
    void finish();  // the output back to the device

   private:
    void* device_out_;
    size_t out_bytes_;
    const void* in_ = nullptr;
    void* out_ = nullptr;
  };

 private:
  std::unique_ptr<Communicator> wrap(std::unique_ptr<Communicator> inner_group) override;
  Buffer host_;  // synchronous calls' staging, grown to the largest call
};

}  // namespace dts

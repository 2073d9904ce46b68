// The `ring(INNER)` backend: reference ring all_reduce, reduce_scatter and all_gather built only
// on INNER's isend/irecv, chunked and pipelined (Patarasuk & Yuan 2009; the schedule of NCCL's
// ring and gloo's allreduce_ring_chunked). Everything else is delegated to INNER. Host memory only.
#pragma once
#include <memory>
#include <string>

#include "comm/communicator.h"

namespace dts {

class RingCommunicator final : public Communicator {
 public:
  // Wraps `inner` (must not be null). options.chunk_bytes sets the pipeline's chunk size and
  // options.timeout_seconds bounds every wait.
  RingCommunicator(std::unique_ptr<Communicator> inner, const CommOptions& options);

  std::string_view backend() const override { return spec_; }
  std::string version() const override { return inner_->version(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Memory memory() const override { return inner_->memory(); }

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
  void barrier() override;
  std::unique_ptr<Communicator> split(int color, int key) override;

  // Elements per chunk for `dtype`: chunk_bytes rounded down to whole elements, at least one.
  size_t chunk_elements(DType dtype) const;

 private:
  void require_host_memory(std::string_view op) const;

  std::unique_ptr<Communicator> inner_;
  CommOptions options_;
  std::string spec_;
};

}  // namespace dts

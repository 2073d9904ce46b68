// The `ring(INNER)` backend: reference ring all_reduce (also behind all_reduce_async), reduce_scatter
// and all_gather built only on INNER's isend/irecv, chunked and pipelined (Patarasuk & Yuan 2009;
// NCCL's ring, gloo's allreduce_ring_chunked). The rest is forwarded to INNER. Host memory only.
#pragma once
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "comm/forwarding_communicator.h"

namespace dts {

class RingCommunicator final : public ForwardingCommunicator {
 public:
  // Wraps `inner` (must not be null). options.chunk_bytes sets the pipeline's chunk size and
  // options.timeout_seconds bounds every wait.
  RingCommunicator(std::unique_ptr<Communicator> inner, const CommOptions& options);

  void all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* in, void* out, size_t out_count, DType dtype, ReduceOp op) override;
  void all_gather(const void* in, void* out, size_t in_count, DType dtype) override;
  // The ring's all_reduce, run synchronously (the interface's default body): forwarding it would
  // measure INNER's all_reduce under the ring's name.
  std::unique_ptr<Work> all_reduce_async(const void* in, void* out, size_t count, DType dtype,
                                         ReduceOp op) override;

  // Elements per chunk for `dtype`: chunk_bytes rounded down to whole elements, at least one.
  size_t chunk_elements(DType dtype) const;

 private:
  std::unique_ptr<Communicator> wrap(std::unique_ptr<Communicator> inner_group) override;
  void require_host_memory(std::string_view op) const;

  CommOptions options_;
};

}  // namespace dts

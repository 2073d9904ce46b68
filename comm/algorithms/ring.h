// The `ring(INNER)` backend: reference ring all_reduce (also behind all_reduce_async), reduce_scatter
// and all_gather built only on INNER's isend/irecv, chunked and pipelined (Patarasuk & Yuan 2009;
// NCCL's ring, gloo's allreduce_ring_chunked). The rest is forwarded to INNER. Host memory only.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/forwarding_communicator.h"

namespace dts {

// The chunk size, in elements of `element_size` bytes, of a pass whose largest segment holds
// `segment_elements` (1/N of an all_reduce of N ranks, one rank's block of a reduce_scatter or
// all_gather, so the size and the rank count both decide): the rule used when
// CommOptions::chunk_bytes is 0 (auto). ring.cpp says why.
size_t ring_chunk_elements(size_t segment_elements, size_t element_size);

class RingCommunicator final : public ForwardingCommunicator {
 public:
  // Wraps `inner` (must not be null). options.chunk_bytes sets the pipeline's chunk size (0: the
  // rule of ring_chunk_elements) and options.timeout_seconds bounds every wait.
  RingCommunicator(std::unique_ptr<Communicator> inner, const CommOptions& options);

  void all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* in, void* out, size_t out_count, DType dtype, ReduceOp op) override;
  void all_gather(const void* in, void* out, size_t in_count, DType dtype) override;
  // The ring's all_reduce, run synchronously (the interface's default body): forwarding it would
  // measure INNER's all_reduce under the ring's name.
  std::unique_ptr<Work> all_reduce_async(const void* in, void* out, size_t count, DType dtype,
                                         ReduceOp op) override;

  // Elements per chunk of a pass whose segments hold up to `segment_elements`: options.chunk_bytes
  // in whole elements (at least one) when set, else ring_chunk_elements().
  size_t chunk_elements(DType dtype, size_t segment_elements) const;

 private:
  std::unique_ptr<Communicator> wrap(std::unique_ptr<Communicator> inner_group) override;
  void require_host_memory(std::string_view op) const;
  std::chrono::duration<double> timeout() const;
  // Scratch of at least `bytes`, kept between calls (two chunks, or out of place a reduce_scatter
  // block): allocating and faulting in megabytes on every call would cost as much as moving them.
  std::vector<char>& work(size_t bytes);

  CommOptions options_;
  std::vector<char> work_;
};

}  // namespace dts

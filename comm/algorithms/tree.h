// The `tree(INNER)` backend: latency-bound reference collectives built only on INNER's
// isend/irecv, in log2(N) rounds where a ring needs N-1 steps (Thakur, Rabenseifner & Gropp 2005;
// MPICH's small-message algorithms): recursive doubling for all_reduce (also behind
// all_reduce_async), binomial trees for broadcast and reduce from any root. The rest is forwarded
// to INNER. Host memory only.
#pragma once
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "comm/forwarding_communicator.h"

namespace dts {

class TreeCommunicator final : public ForwardingCommunicator {
 public:
  // Wraps `inner` (must not be null); options.timeout_seconds bounds every wait.
  TreeCommunicator(std::unique_ptr<Communicator> inner, const CommOptions& options);

  // Recursive doubling: each round exchanges the whole buffer with rank ^ 2^k. With N not a
  // power of two, P the largest power of two below it and R = N - P, ranks 2i and 2i+1 (i < R)
  // first fold into 2i+1, the P survivors double, and 2i+1 sends the result back to 2i.
  void all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) override;
  // Binomial tree rooted at `root`: rank root+v receives from root+v-2^k (2^k the lowest set bit
  // of v) and passes on to root+v+2^j for every 2^j < 2^k.
  void broadcast(const void* in, void* out, size_t count, DType dtype, int root) override;
  // The same tree upwards: every rank combines what its children send, then sends to its parent.
  void reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op, int root) override;
  // The tree's all_reduce, run synchronously (the interface's default body): forwarding it would
  // measure INNER's all_reduce under the tree's name.
  std::unique_ptr<Work> all_reduce_async(const void* in, void* out, size_t count, DType dtype,
                                         ReduceOp op) override;

 private:
  std::unique_ptr<Communicator> wrap(std::unique_ptr<Communicator> inner_group) override;
  void require_host_memory(std::string_view op) const;
  void require_root(int root, std::string_view op) const;

  CommOptions options_;
};

}  // namespace dts

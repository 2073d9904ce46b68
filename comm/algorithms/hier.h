// The `hier(INNER)` backend: hierarchical all_reduce (also behind all_reduce_async), built from
// INNER's own collectives on two kinds of groups split from INNER: the ranks of one node, and the
// ranks that hold the same shard on every node. Less traffic crosses nodes than in a flat ring
// (why clusters use it, as Horovod's hierarchical allreduce does). The rest is forwarded to INNER.
// Host memory only.
//
// Nodes come from comm/topology.h (options.node_name, else DTS_NODE, else the host name). With S
// the fewest ranks on any node, the buffer is cut into S equal shards of count / S elements:
//   1. inside each node, shard s is combined (by op; avg adds) onto local rank s (s < S): one
//      reduce_scatter on a node of exactly S ranks, S rooted reduces on a bigger one (out of
//      place, from a copy when the call is in place);
//   2. local rank s of every node all_reduces shard s across nodes (one rank per node per group);
//      avg divides by INNER's size here, once, so every rank gets the owner's bits;
//   3. inside each node, shard s is spread from local rank s: one all_gather on a node of exactly
//      S ranks, S broadcasts on a bigger one.
// The count % S elements left over (fewer than S) are all_reduced by INNER over all ranks. So any
// layout is served: even nodes run the classic reduce_scatter / all_reduce / all_gather; uneven
// nodes (3 ranks as 2+1) keep one cross-node all_reduce per shard, the bigger nodes paying with
// rooted reduce/broadcast inside the node, where bandwidth is cheap.
#pragma once
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "comm/forwarding_communicator.h"
#include "comm/topology.h"

namespace dts {

class HierCommunicator final : public ForwardingCommunicator {
 public:
  // Wraps `inner` (must not be null). Collective over INNER: discovers the nodes and splits the
  // node and shard groups (not when INNER's memory is a device's: all_reduce then refuses).
  // options.node_name names this process's node; empty: DTS_NODE, else the host name, read once
  // here so that split() groups keep the names this communicator was built with.
  HierCommunicator(std::unique_ptr<Communicator> inner, const CommOptions& options);

  void all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) override;
  // The hierarchical all_reduce, run synchronously (the interface's default body): forwarding it
  // would measure INNER's all_reduce under hier's name.
  std::unique_ptr<Work> all_reduce_async(const void* in, void* out, size_t count, DType dtype,
                                         ReduceOp op) override;

  // INNER, or either group split from it (null for device memory), left aborted by an error.
  bool aborted() const override {
    return inner_->aborted() || (node_ && node_->aborted()) || (across_ && across_->aborted());
  }
  void abort() override {
    inner_->abort();
    if (node_) node_->abort();
    if (across_) across_->abort();
  }

  // The layout as discovered (empty for device memory), and S, the shards of the scheme above.
  const NodeMap& nodes() const { return nodes_; }
  int shards() const { return shards_; }

 private:
  std::unique_ptr<Communicator> wrap(std::unique_ptr<Communicator> inner_group) override;
  void require_host_memory(std::string_view op) const;

  CommOptions options_;
  NodeMap nodes_;
  int shards_ = 0;
  int local_rank_ = 0;
  // Ranks of this node (local rank = rank among them), and local rank local_rank_ of every node.
  std::unique_ptr<Communicator> node_, across_;
};

}  // namespace dts

// The `hier(INNER)` backend: all_reduce in three phases (inside the node, across nodes, inside the
// node) over groups split from INNER; see hier.h for the scheme and how it serves uneven nodes.
#include "comm/algorithms/hier.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/reduce.h"

namespace dts {

HierCommunicator::HierCommunicator(std::unique_ptr<Communicator> inner, const CommOptions& options)
    : ForwardingCommunicator(std::move(inner), "hier"), options_(options) {
  options_.node_name = node_name(options.node_name);
  if (inner_->memory() != Memory::host) return;  // every rank of INNER decides alike
  nodes_ = discover_nodes(*inner_, options_.node_name);
  const int rank = inner_->rank();
  const int node = nodes_.node_of_rank[static_cast<size_t>(rank)];
  local_rank_ = nodes_.local_rank(rank);
  shards_ = nodes_.ranks_per_node();
  for (int n = 0; n < nodes_.nodes; ++n) shards_ = std::min(shards_, static_cast<int>(nodes_.ranks_on(n).size()));
  // Keys keep the orders the scheme names: local rank = position among the node's ranks (the
  // NodeMap's local_rank), and a shard group ordered by node.
  node_ = inner_->split(node, rank);
  across_ = inner_->split(local_rank_, node);
}

void HierCommunicator::require_host_memory(std::string_view op) const {
  if (inner_->memory() != Memory::host) {
    throw Error(Error::Kind::unsupported, std::string(backend()) + ": " + std::string(op) +
                                              " finds nodes and divides avg on the host; inner memory is " +
                                              std::string(name(inner_->memory())));
  }
}

void HierCommunicator::all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) {
  require_host_memory("all_reduce");
  const size_t width = size_of(dtype);
  const auto shards = static_cast<size_t>(shards_);
  const size_t shard = count / shards;  // elements per shard; the rest goes flat, below
  const size_t sharded = shard * shards;
  const auto* source = static_cast<const char*>(in);
  auto* target = static_cast<char*>(out);
  // Every decision below depends only on values all ranks of the group concerned share (count,
  // the layout), so the ranks of each group call the same collectives in the same order.
  if (shard > 0) {
    const int node_size = node_->size();
    const bool even = node_size == shards_;  // this node has exactly S ranks
    const size_t own = static_cast<size_t>(local_rank_) * shard * width;
    // The avg's division waits for the full sum, so the phases add.
    const ReduceOp add = op == ReduceOp::avg ? ReduceOp::sum : op;
    // 1. Shard s, combined over the node, onto local rank s.
    if (node_size == 1) {
      if (in != out) std::memcpy(target, source, sharded * width);
    } else if (even) {
      node_->reduce_scatter(in, target + own, shard, dtype, add);  // in place when in == out
    } else {
      // Out of place even when the caller's call is in place: INNER may refuse an in-place reduce
      // at a non-zero root (MPICH before 4.1.2), and a refusal on this node alone would leave
      // the other nodes waiting in phase 2.
      std::vector<char> copy;
      const char* input = source;
      if (in == out) {
        copy.assign(source, source + sharded * width);
        input = copy.data();
      }
      for (int s = 0; s < shards_; ++s) {
        const size_t at = static_cast<size_t>(s) * shard * width;
        node_->reduce(input + at, target + at, shard, dtype, add, s);
      }
    }
    // 2. Across nodes, by the holders of the shards only (local ranks >= S hold none).
    if (local_rank_ < shards_) {
      if (nodes_.nodes > 1) across_->all_reduce(target + own, target + own, shard, dtype, add);
      if (op == ReduceOp::avg) divide_by(dtype, target + own, shard, size());
    }
    // 3. Every shard to every rank of the node.
    if (node_size > 1 && even) {
      node_->all_gather(target + own, target, shard, dtype);  // in place
    } else if (node_size > 1) {
      for (int s = 0; s < shards_; ++s) {
        char* at = target + static_cast<size_t>(s) * shard * width;
        node_->broadcast(at, at, shard, dtype, s);
      }
    }
  }
  // The count % S leftover elements: fewer than S, not worth three phases.
  if (sharded < count) {
    inner_->all_reduce(source + sharded * width, target + sharded * width, count - sharded, dtype, op);
  }
}

std::unique_ptr<Work> HierCommunicator::all_reduce_async(const void* in, void* out, size_t count, DType dtype,
                                                         ReduceOp op) {
  return Communicator::all_reduce_async(in, out, count, dtype, op);
}

std::unique_ptr<Communicator> HierCommunicator::wrap(std::unique_ptr<Communicator> inner_group) {
  return std::make_unique<HierCommunicator>(std::move(inner_group), options_);
}

namespace {
std::unique_ptr<Communicator> make_hier(const BackendSpec& spec, const CommOptions& options) {
  if (spec.args.size() != 1) {
    throw Error(Error::Kind::invalid_argument,
                "backend hier takes exactly one argument, the inner backend: hier(INNER), e.g. hier(mpi)");
  }
  return std::make_unique<HierCommunicator>(make_communicator(spec.args[0], options), options);
}
}  // namespace

DTS_REGISTER_BACKEND("hier", "hier(INNER)",
                     "hierarchical all_reduce: reduce_scatter in the node, all_reduce across nodes, all_gather in "
                     "the node, over INNER's collectives (nodes: --node, DTS_NODE or the host name)",
                     make_hier);

}  // namespace dts

// The `tree(INNER)` backend: recursive doubling and binomial trees over INNER's isend/irecv.
// A reference for small messages, where a collective costs its rounds (log2(N) here against the
// ring's 2(N-1)) more than its bytes; its bytes are those of the whole buffer in every round.
#include "comm/algorithms/tree.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/reduce.h"

namespace dts {

namespace {

// The requests of one operation and the scratch memory they may still touch. On an error (a wait
// timed out, INNER threw) whatever is still posted is leaked on purpose, as ring.cpp's InFlight
// explains: destroying an MpiWork in flight waits for it without limit, which would turn a
// reported timeout into a hang, and freeing the scratch would let a late message land in freed
// memory. After such an error the communicator and the caller's buffers are not to be used again.
class Flight {
 public:
  explicit Flight(double timeout_seconds) : timeout_(std::max(0.0, timeout_seconds)) {}
  ~Flight() {
    if (requests_.empty()) return;  // all waited for: nothing can touch the memory any more
    for (auto& work : requests_) static_cast<void>(work.release());
    // Moving a vector keeps its heap block: the leaked vectors own what INNER may still use.
    for (auto& buffer : scratch_) static_cast<void>(new std::vector<char>(std::move(buffer)));
  }
  Flight(const Flight&) = delete;
  Flight& operator=(const Flight&) = delete;

  // `bytes` of scratch that live as long as this flight.
  char* scratch(size_t bytes) { return scratch_.emplace_back(bytes).data(); }
  // Through carrier_dtype: the reductions are this algorithm's, the transfers only move bytes.
  void send(Communicator& inner, const void* data, size_t count, DType dtype, int peer) {
    requests_.push_back(inner.isend(data, count, carrier_dtype(dtype), peer));
  }
  void recv(Communicator& inner, void* data, size_t count, DType dtype, int peer) {
    requests_.push_back(inner.irecv(data, count, carrier_dtype(dtype), peer));
  }
  // Every request posted so far, each within the timeout.
  void wait() {
    for (auto& work : requests_) work->wait(timeout_);
    requests_.clear();
  }

 private:
  std::chrono::duration<double> timeout_;
  std::vector<std::vector<char>> scratch_;
  std::vector<std::unique_ptr<Work>> requests_;
};

// Rank of the tree position `virtual_rank` in a tree rooted at `root` (the root is position 0).
int actual_rank(int64_t virtual_rank, int root, int n) { return static_cast<int>((virtual_rank + root) % n); }

}  // namespace

TreeCommunicator::TreeCommunicator(std::unique_ptr<Communicator> inner, const CommOptions& options)
    : ForwardingCommunicator(std::move(inner), "tree"), options_(options) {}

void TreeCommunicator::require_host_memory(std::string_view op) const {
  if (inner_->memory() != Memory::host) {
    throw Error(Error::Kind::unsupported, std::string(backend()) + ": " + std::string(op) +
                                              " reduces on the host; inner memory is " +
                                              std::string(name(inner_->memory())));
  }
}

void TreeCommunicator::require_root(int root, std::string_view op) const {
  if (root < 0 || root >= size()) {
    throw Error(Error::Kind::invalid_argument, std::string(backend()) + ": " + std::string(op) + " root " +
                                                   std::to_string(root) + " outside [0, " +
                                                   std::to_string(size()) + ")");
  }
}

void TreeCommunicator::all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) {
  require_host_memory("all_reduce");
  const int n = size();
  const int rank = this->rank();
  const size_t bytes = count * size_of(dtype);
  if (in != out && bytes > 0) std::memcpy(out, in, bytes);
  if (n == 1 || count == 0) {
    if (op == ReduceOp::avg) divide_by(dtype, out, count, n);  // as the mpi backend does
    return;
  }
  const ReduceOp add = op == ReduceOp::avg ? ReduceOp::sum : op;  // divide once, at the end
  int survivors = 1;  // P: the largest power of two <= N
  while (survivors <= n / 2) survivors *= 2;
  const int extra = n - survivors;  // R: ranks 0..2R-1 fold in pairs

  Flight flight(options_.timeout_seconds);
  // The partial result and the buffer the next one arrives in; they trade places when the
  // arriving data must come first in the combine (see below). Either may end up as `out`.
  char* acc = static_cast<char*>(out);
  char* spare = flight.scratch(bytes);

  if (rank < 2 * extra && rank % 2 == 0) {
    // Folded in: hand the data to rank+1 and wait for the result. The receive is posted only
    // after the send completed, because both use `out`.
    flight.send(*inner_, out, count, dtype, rank + 1);
    flight.wait();
    flight.recv(*inner_, out, count, dtype, rank + 1);
    flight.wait();
    return;
  }
  if (rank < 2 * extra) {
    flight.recv(*inner_, spare, count, dtype, rank - 1);
    flight.wait();
    reduce_into(dtype, add, spare, acc, count);  // rank-1's data first
    std::swap(acc, spare);
  }

  // Survivor s is rank 2s+1 for s < R, else rank s+R; both maps increase, so "lower survivor"
  // and "lower rank" agree.
  const int me = rank < 2 * extra ? rank / 2 : rank - extra;
  auto rank_of = [extra](int survivor) { return survivor < extra ? 2 * survivor + 1 : survivor + extra; };
  for (int mask = 1; mask < survivors; mask <<= 1) {
    const int partner = me ^ mask;
    flight.recv(*inner_, spare, count, dtype, rank_of(partner));
    flight.send(*inner_, acc, count, dtype, rank_of(partner));
    flight.wait();
    // Both partners put the lower survivor's data first, so both hold the same bits afterwards
    // even where the order shows (min/max of +0 and -0, NaN payloads), and so do all ranks at
    // the end: at every round each pair combines the same two values in the same order.
    if (me < partner) {
      reduce_into(dtype, add, acc, spare, count);
    } else {
      reduce_into(dtype, add, spare, acc, count);
      std::swap(acc, spare);
    }
  }
  if (op == ReduceOp::avg) divide_by(dtype, acc, count, n);
  if (acc != out) std::memcpy(out, acc, bytes);
  if (rank < 2 * extra) {
    flight.send(*inner_, out, count, dtype, rank - 1);
    flight.wait();
  }
}

void TreeCommunicator::broadcast(const void* in, void* out, size_t count, DType dtype, int root) {
  require_host_memory("broadcast");
  require_root(root, "broadcast");
  const int n = size();
  const int rank = this->rank();
  if (rank == root && in != out && count > 0) std::memcpy(out, in, count * size_of(dtype));
  if (n == 1 || count == 0) return;
  const int64_t position = (rank - root + n) % n;  // the root is position 0
  Flight flight(options_.timeout_seconds);
  // The parent is this position less its lowest set bit; the root has none and stops at N.
  int64_t mask = 1;
  for (; mask < n; mask <<= 1) {
    if ((position & mask) != 0) {
      flight.recv(*inner_, out, count, dtype, actual_rank(position - mask, root, n));
      flight.wait();
      break;
    }
  }
  // The children: position + 2^j for every 2^j below that bit. `out` is only read from here on,
  // so all sends go out at once.
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (position + mask < n) flight.send(*inner_, out, count, dtype, actual_rank(position + mask, root, n));
  }
  flight.wait();
}

void TreeCommunicator::reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op, int root) {
  require_host_memory("reduce");
  require_root(root, "reduce");
  const int n = size();
  const int rank = this->rank();
  const size_t bytes = count * size_of(dtype);
  const ReduceOp add = op == ReduceOp::avg ? ReduceOp::sum : op;  // divide once, at the root
  Flight flight(options_.timeout_seconds);
  // This rank's partial result. Outside the root, `out` is not this call's to write (MPI's
  // receive buffer is significant at the root only), and `in` is never written: the first
  // child's data goes into a copy, and a leaf sends its input as is.
  const char* partial = static_cast<const char*>(in);
  char* acc = nullptr;
  if (rank == root) {
    if (in != out && bytes > 0) std::memcpy(out, in, bytes);
    acc = static_cast<char*>(out);
    partial = acc;
  }
  if (n > 1 && count > 0) {
    const int64_t position = (rank - root + n) % n;
    char* received = nullptr;
    // Children first, nearest (position + 1) first, then the parent: the mirror of broadcast.
    for (int64_t mask = 1; mask < n; mask <<= 1) {
      if ((position & mask) != 0) {
        flight.send(*inner_, partial, count, dtype, actual_rank(position - mask, root, n));
        flight.wait();
        break;
      }
      if (position + mask >= n) continue;
      if (received == nullptr) received = flight.scratch(bytes);
      flight.recv(*inner_, received, count, dtype, actual_rank(position + mask, root, n));
      flight.wait();
      if (acc == nullptr) {
        acc = flight.scratch(bytes);
        std::memcpy(acc, in, bytes);
        partial = acc;
      }
      reduce_into(dtype, add, acc, received, count);  // the lower positions' data first
    }
  }
  if (rank == root && op == ReduceOp::avg) divide_by(dtype, out, count, n);
}

std::unique_ptr<Work> TreeCommunicator::all_reduce_async(const void* in, void* out, size_t count, DType dtype,
                                                         ReduceOp op) {
  return Communicator::all_reduce_async(in, out, count, dtype, op);
}

std::unique_ptr<Communicator> TreeCommunicator::wrap(std::unique_ptr<Communicator> inner_group) {
  return std::make_unique<TreeCommunicator>(std::move(inner_group), options_);
}

namespace {
std::unique_ptr<Communicator> make_tree(const BackendSpec& spec, const CommOptions& options) {
  if (spec.args.size() != 1) {
    throw Error(Error::Kind::invalid_argument,
                "backend tree takes exactly one argument, the inner backend: tree(INNER), e.g. tree(mpi)");
  }
  return std::make_unique<TreeCommunicator>(make_communicator(spec.args[0], options), options);
}
}  // namespace

DTS_REGISTER_BACKEND("tree", "tree(INNER)",
                     "reference recursive-doubling all_reduce and binomial-tree broadcast / reduce over INNER's "
                     "send/recv",
                     make_tree);

}  // namespace dts

// The `ring(INNER)` backend: chunked, pipelined ring collectives over INNER's isend/irecv.
// A reference to check vendor libraries against and a baseline for their bandwidth: its busbw is
// what a plain ring over the same transport achieves. See run_ring() for the schedule.
#include "comm/algorithms/ring.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/reduce.h"

namespace dts {

namespace {

// Where each of the N segments lies in a buffer, in elements.
struct Segments {
  std::vector<size_t> offset, length;
  size_t max_length = 0;
};

// all_reduce: `count` elements cut into N nearly equal segments; the first count % N segments
// get one element more, so segments may be empty when count < N.
Segments split_evenly(size_t count, int n) {
  const auto parts = static_cast<size_t>(n);
  Segments s;
  for (size_t i = 0; i < parts; ++i) {
    s.offset.push_back(i * (count / parts) + std::min(i, count % parts));
    s.length.push_back(count / parts + (i < count % parts ? 1 : 0));
  }
  s.max_length = count / parts + (count % parts != 0 ? 1 : 0);
  return s;
}

// reduce_scatter / all_gather: N blocks of `block` elements, block r belonging to rank r.
Segments split_blocks(size_t block, int n) {
  Segments s;
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    s.offset.push_back(i * block);
    s.length.push_back(block);
  }
  s.max_length = block;
  return s;
}

struct RingPass {
  Communicator& inner;
  char* data;  // all N segments; reduced and gathered in place
  const Segments& segments;
  DType dtype;
  ReduceOp op;
  // Global steps [first_step, end_step): steps [0, N-1) are the reduce-scatter phase, steps
  // [N-1, 2N-2) the all-gather phase. all_reduce runs both, the others one.
  int first_step;
  int end_step;
  size_t chunk_elements;
  std::chrono::duration<double> timeout;
  // reduce_scatter's copy of the input, which `data` points into; leaked with the requests on
  // failure (see InFlight).
  std::vector<char>* working_copy = nullptr;
};

// The requests of one ring pass and the memory they may still touch. On failure (a wait timed
// out, the inner backend threw) they are leaked on purpose: destroying an MpiWork in flight
// waits for it without limit, which would turn a reported timeout into a hang, and freeing the
// buffers would let a late message land in freed memory. After such an error the communicator
// and the caller's buffers are not to be used again; the harness reports and aborts.
struct InFlight {
  std::vector<char> scratch;  // two chunks: the one being reduced and the one arriving
  std::vector<std::unique_ptr<Work>> sends;
  std::unique_ptr<Work> ahead, current;

  void abandon(std::vector<char>* working_copy) {
    for (auto& work : sends) static_cast<void>(work.release());
    static_cast<void>(ahead.release());
    static_cast<void>(current.release());
    // Moving a vector keeps its heap block: the leaked vectors own what MPI may still use.
    static_cast<void>(new std::vector<char>(std::move(scratch)));
    if (working_copy != nullptr) static_cast<void>(new std::vector<char>(std::move(*working_copy)));
  }
};

// The ring schedule, shared by all three collectives.
//
// Numbering. Rank r sends only to r+1 and receives only from r-1 (mod N). At global step g
// rank r sends segment (r-g-1) mod N and receives segment (r-g-2) mod N: what r receives at
// step g is exactly what it sends at step g+1. In the reduce-scatter phase (g < N-1) the
// received segment is reduced into r's copy, so after step N-2 rank r holds segment
// (r-N) = r reduced over all ranks (and divided by N for avg, once, by its owner). In the
// all-gather phase (g >= N-1) the received segment is stored as is; step N-1 sends segment r,
// the owner's finished copy, and after step 2N-3 every rank holds every owner's bits, so all
// ranks end with identical results whatever the summation order.
//
// Chunks. Every segment is cut into K = ceil(max_segment / chunk) chunks (the last ones short
// or empty), so transfer (g, j) has index k = g*K + j. Both ends compute the same length for
// (g, j) and skip empty transfers alike. The loop over k: post irecv(k+1) ahead into the other
// half of a two-chunk scratch (its previous user, k-1, was reduced already), wait for recv k,
// reduce it, then isend chunk j of step g+1, which is the chunk just finished. So the reduction
// of chunk k overlaps the transfer of chunk k+1, and step g+1 starts on chunk 0 while step g is
// still moving chunk K-1: the steps pipeline.
//
// Matching. The inner interface has no tags; MPI's non-overtaking rule matches messages
// between a pair in posting order. Every rank posts its isends to r+1 in increasing k (all of
// step first_step up front, then k+K after finishing k) and its irecvs from r-1 in increasing k,
// so send k of r-1 meets recv k of r, and both have the same length.
//
// Buffer reuse. An isend reads `data` until complete. In the reduce-scatter phase a segment is
// reduced once and sent only afterwards. In all_reduce's all-gather phase, recv (g, j) lands in
// the piece that send (g+1-N, j) read, so that send is waited for before the irecv is posted;
// its receiver posted that recv N-1 steps earlier in the same order, so this cannot deadlock.
void run_ring(const RingPass& pass) {
  Communicator& inner = pass.inner;
  const int n = inner.size();
  const int rank = inner.rank();
  const int next = (rank + 1) % n;
  const int prev = (rank - 1 + n) % n;
  const int gather_start = n - 1;
  const size_t chunk = pass.chunk_elements;
  const size_t chunks = (pass.segments.max_length + chunk - 1) / chunk;
  if (chunks == 0 || pass.first_step >= pass.end_step) return;
  const size_t element_size = size_of(pass.dtype);

  auto segment_mod = [n](int x) { return static_cast<size_t>(((x % n) + n) % n); };
  struct Piece {
    size_t offset, length;  // elements within data
  };
  auto piece = [&](size_t segment, size_t j) {
    const size_t length = pass.segments.length[segment];
    const size_t begin = std::min(length, j * chunk);
    return Piece{pass.segments.offset[segment] + begin, std::min(length - begin, chunk)};
  };
  auto step_of = [chunks](size_t k) { return static_cast<int>(k / chunks); };
  auto sent_piece = [&](size_t k) { return piece(segment_mod(rank - step_of(k) - 1), k % chunks); };
  auto received_piece = [&](size_t k) { return piece(segment_mod(rank - step_of(k) - 2), k % chunks); };
  auto at = [&](const Piece& p) { return pass.data + p.offset * element_size; };

  const size_t first = static_cast<size_t>(pass.first_step) * chunks;
  const size_t end = static_cast<size_t>(pass.end_step) * chunks;
  const bool reduces = pass.first_step < gather_start;
  InFlight flight;
  flight.scratch.resize(reduces ? 2 * chunk * element_size : 0);
  flight.sends.resize(end - first);
  auto& sends = flight.sends;

  auto post_send = [&](size_t k) {
    const Piece p = sent_piece(k);
    if (p.length > 0) sends[k - first] = inner.isend(at(p), p.length, pass.dtype, next);
  };
  auto post_recv = [&](size_t k) -> std::unique_ptr<Work> {
    const Piece p = received_piece(k);
    if (p.length == 0) return nullptr;
    if (step_of(k) < gather_start) {
      return inner.irecv(flight.scratch.data() + (k % 2) * chunk * element_size, p.length, pass.dtype, prev);
    }
    // All-gather: receive straight into place, once the send that read this piece is done.
    const int reader_step = step_of(k) + 1 - n;
    if (reader_step >= pass.first_step) {
      auto& reader = sends[static_cast<size_t>(reader_step) * chunks + k % chunks - first];
      if (reader) reader->wait(pass.timeout);
      reader.reset();
    }
    return inner.irecv(at(p), p.length, pass.dtype, prev);
  };

  try {
    for (size_t k = first; k < first + chunks; ++k) post_send(k);
    flight.ahead = post_recv(first);
    for (size_t k = first; k < end; ++k) {
      flight.current = std::move(flight.ahead);
      if (k + 1 < end) flight.ahead = post_recv(k + 1);
      if (flight.current) flight.current->wait(pass.timeout);
      flight.current.reset();
      const Piece p = received_piece(k);
      if (step_of(k) < gather_start && p.length > 0) {
        reduce_into(pass.dtype, pass.op, at(p), flight.scratch.data() + (k % 2) * chunk * element_size, p.length);
        // The last reduce step finishes this rank's own segment: divide once, before it is sent.
        if (step_of(k) == gather_start - 1 && pass.op == ReduceOp::avg) divide_by(pass.dtype, at(p), p.length, n);
      }
      if (k + chunks < end) post_send(k + chunks);
    }
    for (auto& work : sends) {
      if (work) work->wait(pass.timeout);
    }
  } catch (...) {
    flight.abandon(pass.working_copy);
    throw;
  }
}

}  // namespace

RingCommunicator::RingCommunicator(std::unique_ptr<Communicator> inner, const CommOptions& options)
    : ForwardingCommunicator(std::move(inner), "ring"), options_(options) {}

size_t RingCommunicator::chunk_elements(DType dtype) const {
  return std::max<size_t>(1, options_.chunk_bytes / size_of(dtype));
}

void RingCommunicator::require_host_memory(std::string_view op) const {
  if (inner_->memory() != Memory::host) {
    throw Error(Error::Kind::unsupported, std::string(backend()) + ": " + std::string(op) +
                                              " reduces on the host; inner memory is " +
                                              std::string(name(inner_->memory())));
  }
}

void RingCommunicator::all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) {
  require_host_memory("all_reduce");
  const int n = size();
  if (in != out && count > 0) std::memcpy(out, in, count * size_of(dtype));
  if (n == 1) {
    if (op == ReduceOp::avg) divide_by(dtype, out, count, n);  // as the mpi backend does
    return;
  }
  const Segments segments = split_evenly(count, n);
  run_ring({*inner_, static_cast<char*>(out), segments, dtype, op, 0, 2 * n - 2, chunk_elements(dtype),
            std::chrono::duration<double>(std::max(0.0, options_.timeout_seconds)), nullptr});
}

void RingCommunicator::reduce_scatter(const void* in, void* out, size_t out_count, DType dtype, ReduceOp op) {
  require_host_memory("reduce_scatter");
  const int n = size();
  const size_t element_size = size_of(dtype);
  const size_t own_offset = static_cast<size_t>(rank()) * out_count * element_size;
  // NCCL's in place: out == in + rank * out_count, and `in` is the working buffer.
  const bool in_place = out == static_cast<const char*>(in) + own_offset;
  std::vector<char> copy;
  char* data = nullptr;
  if (in_place) {
    data = static_cast<char*>(const_cast<void*>(in));
  } else {
    // The caller's input stays untouched: reduce into a copy, then hand out our block.
    copy.assign(static_cast<const char*>(in),
                static_cast<const char*>(in) + out_count * element_size * static_cast<size_t>(n));
    data = copy.data();
  }
  if (n > 1) {
    const Segments segments = split_blocks(out_count, n);
    run_ring({*inner_, data, segments, dtype, op, 0, n - 1, chunk_elements(dtype),
              std::chrono::duration<double>(std::max(0.0, options_.timeout_seconds)), &copy});
  } else if (op == ReduceOp::avg) {
    divide_by(dtype, data + own_offset, out_count, n);  // as the mpi backend does
  }
  if (!in_place && out_count > 0) std::memcpy(out, data + own_offset, out_count * element_size);
}

void RingCommunicator::all_gather(const void* in, void* out, size_t in_count, DType dtype) {
  require_host_memory("all_gather");
  const int n = size();
  char* data = static_cast<char*>(out);
  char* own = data + static_cast<size_t>(rank()) * in_count * size_of(dtype);
  if (in != own && in_count > 0) std::memcpy(own, in, in_count * size_of(dtype));
  if (n == 1) return;
  const Segments segments = split_blocks(in_count, n);
  // Only the gather phase: rank r starts out owning block r, as after a reduce-scatter.
  run_ring({*inner_, data, segments, dtype, ReduceOp::sum, n - 1, 2 * n - 2, chunk_elements(dtype),
            std::chrono::duration<double>(std::max(0.0, options_.timeout_seconds)), nullptr});
}

std::unique_ptr<Work> RingCommunicator::all_reduce_async(const void* in, void* out, size_t count, DType dtype,
                                                         ReduceOp op) {
  return Communicator::all_reduce_async(in, out, count, dtype, op);
}

std::unique_ptr<Communicator> RingCommunicator::wrap(std::unique_ptr<Communicator> inner_group) {
  return std::make_unique<RingCommunicator>(std::move(inner_group), options_);
}

namespace {
std::unique_ptr<Communicator> make_ring(const BackendSpec& spec, const CommOptions& options) {
  if (spec.args.size() != 1) {
    throw Error(Error::Kind::invalid_argument,
                "backend ring takes exactly one argument, the inner backend: ring(INNER), e.g. ring(mpi)");
  }
  return std::make_unique<RingCommunicator>(make_communicator(spec.args[0], options), options);
}
}  // namespace

DTS_REGISTER_BACKEND("ring", "ring(INNER)",
                     "reference ring all_reduce / reduce_scatter / all_gather over INNER's send/recv", make_ring);

}  // namespace dts

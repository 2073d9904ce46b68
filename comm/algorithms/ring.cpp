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

// Where the reduce-scatter phase's receives land and what they are reduced into.
enum class Landing {
  // In place (in == out): into a two-chunk scratch, then reduced into `out` at the segment's place.
  scratch,
  // Out of place, `out` holding every segment (all_reduce): straight into `out` at the segment's
  // place, then reduced with `in` there. Nothing is copied, and `in` is only read.
  output,
  // Out of place, `out` holding one block (reduce_scatter): into `out` or a staging block of the
  // same size, alternating by step so that the last step lands in `out`; reduced with `in` there.
  alternating,
};

struct RingPass {
  Communicator& inner;
  // The input: the first reduce-scatter step sends it, and (Landing::output, alternating) the
  // reductions combine it. In place it is `out`.
  const char* in;
  // Where the result lands: every segment at its place (all_reduce, all_gather, in-place
  // reduce_scatter), or this rank's block alone (Landing::alternating).
  char* out;
  const Segments& segments;
  DType dtype;
  ReduceOp op;
  // Global steps [first_step, end_step): steps [0, N-1) are the reduce-scatter phase, steps
  // [N-1, 2N-2) the all-gather phase. all_reduce runs both, the others one.
  int first_step;
  int end_step;
  Landing landing;
  size_t chunk_elements;
  std::chrono::duration<double> timeout;
  // Scratch (two chunks) or the staging block, kept by the communicator between calls; leaked
  // with the requests on failure (see InFlight).
  std::vector<char>& work;
  // all_gather out of place: this rank's block in the caller's input. The first step sends it
  // from there, and it is copied into `out` while those sends travel, not before them.
  const char* own_input = nullptr;
};

// The requests of one ring pass. On failure (a wait timed out, the inner backend threw) they
// are leaked on purpose, with the memory they may still touch: destroying an MpiWork in flight
// waits for it without limit, which would turn a reported timeout into a hang, and freeing the
// buffers would let a late message land in freed memory. After such an error the communicator
// and the caller's buffers are not to be used again; the harness reports and aborts.
struct InFlight {
  std::vector<std::unique_ptr<Work>> sends;
  std::unique_ptr<Work> ahead, current;

  void abandon(std::vector<char>& work) {
    for (auto& request : sends) static_cast<void>(request.release());
    static_cast<void>(ahead.release());
    static_cast<void>(current.release());
    // Moving a vector keeps its heap block: the leaked vector owns what MPI may still use.
    static_cast<void>(new std::vector<char>(std::move(work)));
  }
};

// The ring schedule, shared by all three collectives.
//
// Numbering. Rank r sends only to r+1 and receives only from r-1 (mod N). At global step g
// rank r sends segment (r-g-1) mod N and receives segment (r-g-2) mod N: what r receives at
// step g is exactly what it sends at step g+1. In the reduce-scatter phase (g < N-1) the
// received segment is reduced with r's own input, so after step N-2 rank r holds segment
// (r-N) = r reduced over all ranks (and divided by N for avg, once, by its owner). In the
// all-gather phase (g >= N-1) the received segment is stored as is; step N-1 sends segment r,
// the owner's finished copy, and after step 2N-3 every rank holds every owner's bits, so all
// ranks end with identical results whatever the summation order. At N = 2 each step is a
// pairwise exchange.
//
// Chunks. Every segment is cut into K = ceil(max_segment / chunk) chunks (the last ones short
// or empty), so transfer (g, j) has index k = g*K + j. Both ends compute the same length for
// (g, j) and skip empty transfers alike. The loop over k: post irecv(k+1) ahead, wait for recv
// k, reduce it, isend chunk j of step g+1 (the chunk just finished), then wait for this rank's
// own send k. So the reduction of chunk k overlaps the transfer of chunk k+1 and reads a chunk
// that just arrived (still in cache), and step g+1 starts on chunk 0 while step g is still
// moving chunk K-1: the steps pipeline. The wait for send k keeps about one step of sends in
// flight, as MPI's own ring does (a sendrecv per step): with more ranks than cores it measured
// faster (4 ranks on 2 cores, all_gather of 1 MiB, 20 rounds: 0.83-0.88 of Open MPI's busbw
// against 0.68-0.72 with every send left until the end).
//
// Copies. None beyond the transfers: the first step sends from the input, a reduction writes
// its result where the next step sends it from (Landing), and the all-gather phase receives
// straight into place. all_gather out of place copies its own block into the output while its
// first sends, which read the caller's input, travel (own_input).
//
// Matching. The inner interface has no tags; MPI's non-overtaking rule matches messages
// between a pair in posting order. Every rank posts its isends to r+1 in increasing k (all of
// step first_step up front, then k+K after finishing k) and its irecvs from r-1 in increasing k,
// so send k of r-1 meets recv k of r, and both have the same length.
//
// Buffer reuse. An isend reads its piece until complete, so a receive into a piece that a send
// read waits for that send first: in the all-gather phase, recv (g, j) lands in the piece that
// send (g+1-N, j) read (unless it read the caller's input); with Landing::alternating, recv
// (g, j) lands in the piece of the block that send (g-1, j) read.
//
// Progress. Take the rank furthest behind, at transfer k. Its recv k needs the predecessor's
// send k, posted once the predecessor finished transfer k-K; a send it waits for needs a recv
// that the successor posted on reaching the same transfer (recvs go one ahead, in order) and
// completes from inside any wait of its own. Both are ahead of it, so the rank furthest behind
// always moves on, and no cycle of waits forms, at any N.
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
    size_t begin, length;  // elements within the segment
    size_t offset;         // elements within a buffer holding every segment
  };
  auto piece = [&](size_t segment, size_t j) {
    const size_t length = pass.segments.length[segment];
    const size_t begin = std::min(length, j * chunk);
    return Piece{begin, std::min(length - begin, chunk), pass.segments.offset[segment] + begin};
  };
  auto step_of = [chunks](size_t k) { return static_cast<int>(k / chunks); };
  auto sent_piece = [&](size_t k) { return piece(segment_mod(rank - step_of(k) - 1), k % chunks); };
  auto received_piece = [&](size_t k) { return piece(segment_mod(rank - step_of(k) - 2), k % chunks); };
  auto in_at = [&](const Piece& p) { return pass.in + p.offset * element_size; };
  auto out_at = [&](const Piece& p) { return pass.out + p.offset * element_size; };
  const bool in_place = pass.in == pass.out;
  // Landing::alternating: the block that step g's receives land in (the last step: `out`).
  auto block_at = [&](int g, const Piece& p) {
    char* block = (pass.end_step - 1 - g) % 2 == 0 ? pass.out : pass.work.data();
    return block + p.begin * element_size;
  };
  auto scratch_at = [&](size_t k) { return pass.work.data() + (k % 2) * chunk * element_size; };

  const size_t first = static_cast<size_t>(pass.first_step) * chunks;
  const size_t end = static_cast<size_t>(pass.end_step) * chunks;
  InFlight flight;
  flight.sends.resize(end - first);
  auto& sends = flight.sends;
  auto wait_for_send = [&](size_t k) {
    if (k < first) return;
    auto& request = sends[k - first];
    if (request) request->wait(pass.timeout);
    request.reset();
  };

  auto source = [&](size_t k, const Piece& p) -> const char* {
    const int g = step_of(k);
    if (g == 0) return in_at(p);
    if (g == pass.first_step && pass.own_input) return pass.own_input + p.begin * element_size;
    if (pass.landing == Landing::alternating) return block_at(g - 1, p);
    return out_at(p);
  };
  auto post_send = [&](size_t k) {
    const Piece p = sent_piece(k);
    // fp8 travels as u8 (carrier_dtype): INNER moves the bytes, the reductions are this ring's.
    if (p.length > 0) sends[k - first] = inner.isend(source(k, p), p.length, carrier_dtype(pass.dtype), next);
  };
  auto destination = [&](size_t k, const Piece& p) -> char* {
    const int g = step_of(k);
    if (g >= gather_start) {
      const int reader_step = g + 1 - n;
      if (reader_step > 0 || in_place) wait_for_send(static_cast<size_t>(reader_step) * chunks + k % chunks);
      return out_at(p);
    }
    switch (pass.landing) {
      case Landing::scratch: return scratch_at(k);
      case Landing::output: return out_at(p);
      case Landing::alternating:
        if (g >= 2) wait_for_send(k - chunks);
        return block_at(g, p);
    }
    return nullptr;
  };
  auto post_recv = [&](size_t k) -> std::unique_ptr<Work> {
    const Piece p = received_piece(k);
    if (p.length == 0) return nullptr;
    return inner.irecv(destination(k, p), p.length, carrier_dtype(pass.dtype), prev);
  };
  // Reduce-scatter phase: combine what arrived with this rank's own contribution.
  auto reduce_arrived = [&](size_t k, const Piece& p) {
    const int g = step_of(k);
    char* acc = nullptr;
    switch (pass.landing) {
      case Landing::scratch:
        acc = out_at(p);
        reduce_into(pass.dtype, pass.op, acc, scratch_at(k), p.length);
        break;
      case Landing::output:
        acc = out_at(p);
        reduce_into(pass.dtype, pass.op, acc, in_at(p), p.length);
        break;
      case Landing::alternating:
        acc = block_at(g, p);
        reduce_into(pass.dtype, pass.op, acc, in_at(p), p.length);
        break;
    }
    // The last reduce step finishes this rank's own segment: divide once, before it is sent.
    if (g == gather_start - 1 && pass.op == ReduceOp::avg) divide_by(pass.dtype, acc, p.length, n);
  };

  try {
    for (size_t k = first; k < first + chunks; ++k) post_send(k);
    flight.ahead = post_recv(first);
    if (pass.own_input) {
      const auto own = static_cast<size_t>(rank);
      std::memcpy(pass.out + pass.segments.offset[own] * element_size, pass.own_input,
                  pass.segments.length[own] * element_size);
    }
    for (size_t k = first; k < end; ++k) {
      flight.current = std::move(flight.ahead);
      if (k + 1 < end) flight.ahead = post_recv(k + 1);
      if (flight.current) flight.current->wait(pass.timeout);
      flight.current.reset();
      const Piece p = received_piece(k);
      if (step_of(k) < gather_start && p.length > 0) reduce_arrived(k, p);
      if (k + chunks < end) post_send(k + chunks);
      wait_for_send(k);
    }
    for (size_t k = first; k < end; ++k) wait_for_send(k);
  } catch (...) {
    flight.abandon(pass.work);
    throw;
  }
}

}  // namespace

// The chunk rule (CommOptions::chunk_bytes = 0, `--chunk-bytes auto`): half a segment, at least
// 1 MiB and at most 4 MiB. So a segment up to 1 MiB moves whole, one message per step; up to
// 8 MiB in two chunks, so that one is reduced (or forwarded) while the other moves; beyond, in
// 4 MiB chunks. Why, measured with bench/ring_vs_mpi over Open MPI's shared memory (vader, the
// receiver copying each chunk out of the sender's buffer) on 2 cores:
// - Every chunk is one rendezvous, a handshake that with more ranks than cores waits for the
//   peer to be scheduled. At 4 ranks, 16-64 MiB, chunks of 64 KiB and 256 KiB gave 0.37-0.50
//   and 0.67-0.84 of the all_reduce and reduce_scatter busbw of 1 MiB chunks; all_gather of
//   1-4 MiB in 32, 64 and 128 KiB chunks reached 0.31-0.54, 0.52-0.79 and 0.70-0.95 of Open
//   MPI's busbw, whole segments 0.82-0.84. At 2 ranks chunks from 256 KiB up did alike.
// - Larger chunks gained nothing: 4 and 16 MiB were within 10% of 1 MiB at 16-64 MiB on 2 and
//   4 ranks. The cap keeps large segments pipelined (16 chunks per step at 64 MiB) and the chunk
//   being reduced well within the 32 MiB L3 that every rank shares.
size_t ring_chunk_elements(size_t segment_elements, size_t element_size) {
  constexpr size_t kMiB = size_t{1} << 20;
  const size_t smallest = std::max<size_t>(1, kMiB / element_size);
  return std::clamp((segment_elements + 1) / 2, smallest, std::max(smallest, 4 * kMiB / element_size));
}

RingCommunicator::RingCommunicator(std::unique_ptr<Communicator> inner, const CommOptions& options)
    : ForwardingCommunicator(std::move(inner), "ring"), options_(options) {}

size_t RingCommunicator::chunk_elements(DType dtype, size_t segment_elements) const {
  if (options_.chunk_bytes == 0) return ring_chunk_elements(segment_elements, size_of(dtype));
  return std::max<size_t>(1, options_.chunk_bytes / size_of(dtype));
}

void RingCommunicator::require_host_memory(std::string_view op) const {
  if (inner_->memory() != Memory::host) {
    throw Error(Error::Kind::unsupported, std::string(backend()) + ": " + std::string(op) +
                                              " reduces on the host; inner memory is " +
                                              std::string(name(inner_->memory())));
  }
}

std::vector<char>& RingCommunicator::work(size_t bytes) {
  // Grown, never shrunk or refilled: a collective pays for its scratch once, not on every call.
  if (work_.size() < bytes) work_.resize(bytes);
  return work_;
}

std::chrono::duration<double> RingCommunicator::timeout() const {
  return std::chrono::duration<double>(std::max(0.0, options_.timeout_seconds));
}

void RingCommunicator::all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) {
  require_host_memory("all_reduce");
  const int n = size();
  if (n == 1) {
    if (in != out && count > 0) std::memcpy(out, in, count * size_of(dtype));
    if (op == ReduceOp::avg) divide_by(dtype, out, count, n);  // as the mpi backend does
    return;
  }
  const Segments segments = split_evenly(count, n);
  const size_t chunk = chunk_elements(dtype, segments.max_length);
  const bool in_place = in == out;
  run_ring({*inner_, static_cast<const char*>(in), static_cast<char*>(out), segments, dtype, op, 0, 2 * n - 2,
            in_place ? Landing::scratch : Landing::output, chunk, timeout(),
            work(in_place ? 2 * chunk * size_of(dtype) : 0)});
}

void RingCommunicator::reduce_scatter(const void* in, void* out, size_t out_count, DType dtype, ReduceOp op) {
  require_host_memory("reduce_scatter");
  const int n = size();
  const size_t element_size = size_of(dtype);
  // NCCL's in place: out == in + rank * out_count; then `in` is the working buffer.
  const bool in_place = out == static_cast<const char*>(in) + static_cast<size_t>(rank()) * out_count * element_size;
  if (n == 1) {
    if (!in_place && out_count > 0) std::memcpy(out, in, out_count * element_size);
    if (op == ReduceOp::avg) divide_by(dtype, out, out_count, n);  // as the mpi backend does
    return;
  }
  const Segments segments = split_blocks(out_count, n);
  const size_t chunk = chunk_elements(dtype, out_count);
  if (in_place) {
    char* data = static_cast<char*>(const_cast<void*>(in));
    run_ring({*inner_, data, data, segments, dtype, op, 0, n - 1, Landing::scratch, chunk, timeout(),
              work(2 * chunk * element_size)});
  } else {
    // The caller's input stays untouched; partial sums alternate between `out` and a staging
    // block, which only three or more ranks need (two finish in one step, into `out`).
    run_ring({*inner_, static_cast<const char*>(in), static_cast<char*>(out), segments, dtype, op, 0, n - 1,
              Landing::alternating, chunk, timeout(), work(n > 2 ? out_count * element_size : 0)});
  }
}

void RingCommunicator::all_gather(const void* in, void* out, size_t in_count, DType dtype) {
  require_host_memory("all_gather");
  const int n = size();
  const size_t bytes = in_count * size_of(dtype);
  char* data = static_cast<char*>(out);
  char* own = data + static_cast<size_t>(rank()) * bytes;
  if (n == 1 || bytes == 0) {
    if (in != own && bytes > 0) std::memcpy(own, in, bytes);
    return;
  }
  const Segments segments = split_blocks(in_count, n);
  // Only the gather phase (no landing of reductions to choose): rank r starts out owning block
  // r, as after a reduce-scatter.
  run_ring({*inner_, data, data, segments, dtype, ReduceOp::sum, n - 1, 2 * n - 2, Landing::scratch,
            chunk_elements(dtype, in_count), timeout(), work(0), in != own ? static_cast<const char*>(in) : nullptr});
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

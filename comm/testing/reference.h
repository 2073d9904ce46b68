// Shared helpers for the MPI test binaries (comm/**/*_mpi_test.cpp): reproducible small-integer
// inputs per (stream, rank), the single-process reference reduction every rank computes from all
// ranks' inputs, bit-for-bit comparison with a readable diff, case names and guard bytes.
#pragma once
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/element.h"
#include "core/philox.h"

namespace dts::testing {

inline int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// Largest |input|. 3 keeps every result exact in every dtype for N <= 4, whatever the order of
// combination: |sum| <= 4*3 = 12 and |prod| <= 3^4 = 81 fit i8 (127) and bf16's 8 significant
// bits (256). Products over more ranks use {-1, 0, 1} so they stay exact too.
inline int max_abs_input(ReduceOp op, int n) { return (op == ReduceOp::prod && n > 4) ? 1 : 3; }

// 0, 1, ..., n-1.
inline std::vector<int> all_ranks(int n) {
  std::vector<int> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(r);
  return ranks;
}

// The inputs of one test binary; `seed` is any fixed value: inputs only need to be reproducible.
// `n` is the world size (it bounds the values, see max_abs_input), `stream` tells inputs apart.
struct Inputs {
  uint64_t seed;

  // Element `index` of rank `rank`'s input number `stream`: a small integer (unsigned: non-negative).
  double input_value(DType dtype, ReduceOp op, int n, uint64_t stream, int rank, size_t index) const {
    const auto m = static_cast<uint64_t>(max_abs_input(op, n));
    const uint64_t bits = philox_bits(seed, (stream << 32) | static_cast<uint64_t>(rank), index);
    if (is_unsigned(dtype)) return static_cast<double>(bits % (m + 1));
    return static_cast<double>(static_cast<int64_t>(bits % (2 * m + 1)) - static_cast<int64_t>(m));
  }

  std::vector<char> make_input(DType dtype, ReduceOp op, int n, uint64_t stream, int rank, size_t count) const {
    std::vector<char> data(count * size_of(dtype));
    for (size_t i = 0; i < count; ++i) store_double(dtype, data.data(), i, input_value(dtype, op, n, stream, rank, i));
    return data;
  }

  // The single-process definition over `ranks` (in that order), in double (exact for these
  // inputs), rounded once to dtype by the caller's store_double. avg: integers truncate toward
  // zero; floats round the quotient once (double, then f32/f16/bf16, equals one rounding as
  // 53 >= 2p + 2 for p = 24, 11, 8).
  double reference_reduce(DType dtype, ReduceOp op, int n, uint64_t stream, size_t index,
                          const std::vector<int>& ranks) const {
    double acc = input_value(dtype, op, n, stream, ranks.front(), index);
    for (size_t k = 1; k < ranks.size(); ++k) {
      const double v = input_value(dtype, op, n, stream, ranks[k], index);
      switch (op) {
        case ReduceOp::sum:
        case ReduceOp::avg:
          acc += v;
          break;
        case ReduceOp::prod:
          acc *= v;
          break;
        case ReduceOp::min:
          acc = std::min(acc, v);
          break;
        case ReduceOp::max:
          acc = std::max(acc, v);
          break;
      }
    }
    if (op == ReduceOp::avg) {
      acc /= static_cast<double>(ranks.size());
      if (!is_floating(dtype)) acc = std::trunc(acc);
    }
    return acc;
  }

  // Over all n ranks, 0 to n-1.
  double reference_reduce(DType dtype, ReduceOp op, int n, uint64_t stream, size_t index) const {
    return reference_reduce(dtype, op, n, stream, index, all_ranks(n));
  }

  // Elements [first, first + count) of the reduction over `ranks`, stored as dtype: what
  // all_reduce (first = 0) or this rank's block of reduce_scatter must give.
  std::vector<char> reference_reduced(DType dtype, ReduceOp op, int n, uint64_t stream, size_t first, size_t count,
                                      const std::vector<int>& ranks) const {
    std::vector<char> want(count * size_of(dtype));
    for (size_t i = 0; i < count; ++i) {
      store_double(dtype, want.data(), i, reference_reduce(dtype, op, n, stream, first + i, ranks));
    }
    return want;
  }

  std::vector<char> reference_reduced(DType dtype, ReduceOp op, int n, uint64_t stream, size_t first,
                                      size_t count) const {
    return reference_reduced(dtype, op, n, stream, first, count, all_ranks(n));
  }

  // What all_gather of every rank's make_input(dtype, op, n, stream, rank, in_count) must give:
  // rank r's input as block r.
  std::vector<char> reference_gathered(DType dtype, ReduceOp op, int n, uint64_t stream, size_t in_count) const {
    std::vector<char> want(static_cast<size_t>(n) * in_count * size_of(dtype));
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < in_count; ++i) {
        store_double(dtype, want.data(), static_cast<size_t>(r) * in_count + i,
                     input_value(dtype, op, n, stream, r, i));
      }
    }
    return want;
  }
};

// "" when equal bit for bit; otherwise how many elements differ and the first few.
inline std::string differences(DType dtype, const void* got, const void* want, size_t count) {
  const size_t width = size_of(dtype);
  std::string text;
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(static_cast<const char*>(got) + i * width, static_cast<const char*>(want) + i * width, width) ==
        0) {
      continue;
    }
    if (++wrong <= 3) {
      text += " [" + std::to_string(i) + "] got " + std::to_string(load_double(dtype, got, i)) + " want " +
              std::to_string(load_double(dtype, want, i));
    }
  }
  return wrong == 0 ? "" : std::to_string(wrong) + " of " + std::to_string(count) + " differ:" + text;
}

inline std::string case_name(std::string_view op_name, DType dtype, ReduceOp op, size_t count, bool in_place) {
  return std::string(op_name) + "/" + std::string(name(dtype)) + "/" + std::string(name(op)) + "/" +
         std::to_string(count) + (in_place ? "/in_place" : "/out_of_place");
}

// Guard bytes after an output: an operation must not write past the end.
inline constexpr size_t kGuardBytes = 16;
inline constexpr char kGuardByte = 0x5A;
inline bool guard_intact(const std::vector<char>& buffer, size_t used_bytes) {
  for (size_t i = used_bytes; i < buffer.size(); ++i) {
    if (buffer[i] != kGuardByte) return false;
  }
  return true;
}

}  // namespace dts::testing

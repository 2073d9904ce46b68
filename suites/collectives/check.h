// Correctness of one collective call, decided on each rank without communication: every rank
// can generate every rank's input (a pure function of seed, rank and index), so it computes the
// reference for its own output elements and counts what is wrong.
//
// Two kinds of input:
//  - exact: small integers (±1/±2 for prod) chosen so that every partial result of every
//    summation order is representable in the dtype; the output must match bit for bit.
//  - random: uniform values (floats in [-1, 1); for prod, sign * [0.5, 2) to stay clear of
//    under/overflow), checked against a long double reference with the bound of
//    random_error_bound(); min/max and data movement still must match bit for bit.
#pragma once
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "suites/collectives/collective.h"

namespace dts {

enum class InputKind : uint8_t { exact, random };

struct CheckSpec {
  Collective collective;
  DType dtype;
  ReduceOp op;          // ignored by non-reducing collectives
  int root;             // broadcast, reduce
  int64_t count;        // the API count (per rank for reduce_scatter out, all_gather in, all_to_all block)
  int world_size;
  uint64_t seed;
  InputKind kind;
};

// Elements in each rank's input and output buffer for the out-of-place call.
int64_t input_elements(const CheckSpec& spec);
int64_t output_elements(const CheckSpec& spec);

// Fills rank `rank`'s input buffer (input_elements() elements of spec.dtype).
void fill_input(const CheckSpec& spec, int rank, void* input);
// The value of rank `rank`'s input element `index`, exactly (every input is representable).
double input_value(const CheckSpec& spec, int rank, int64_t index);
// Fills a buffer with a recognisable byte pattern, so elements an operation should have written
// but did not are caught.
void fill_sentinel(void* data, int64_t bytes);

struct CheckResult {
  int64_t checked = 0;
  int64_t wrong = 0;
  double max_ulp = 0;       // largest |got - reference| in units in the last place of the dtype
  std::string first_wrong;  // "element 17: got 3 expected 5"
};

// Checks rank `rank`'s output (output_elements() elements). For reduce, only the root's output
// is defined: other ranks return an empty result.
CheckResult check_output(const CheckSpec& spec, int rank, const void* output);

// Bound on |got - reference| for random inputs of a reducing op, at one element:
//   sum:  (ceil(log2 n) + 1) * eps * sum_r |x_r|                        + eta
//   avg:  (ceil(log2 n) + 1) * eps * sum_r |x_r| / n  +  eps * |ref|    + eta
//   prod: (ceil(log2 n) + 1) * eps * |ref|                              + eta
// eps: the dtype's machine epsilon (2^-23 f32, 2^-52 f64, 2^-10 f16, 2^-7 bf16), eta: its
// smallest subnormal (absolute slack where results underflow). Why: a reduction tree of depth
// ceil(log2 n) rounds each partial result once with relative error at most u = eps/2, and every
// partial result is bounded by sum |x_r| (by |ref|-scaled terms for prod); +1 covers the
// final rounding to the dtype (and avg's division). A sequential ring order rounds n-1 times,
// which the factor 2 between eps and u still covers for n <= 9 in the worst case; beyond that
// the bound holds for random signs, whose rounding errors grow like sqrt(n), not n.
double random_error_bound(DType dtype, ReduceOp op, int world_size, double sum_abs, double ref);

// Units in the last place of `dtype` at |value| (the subnormal spacing near zero); 1 for integers.
double ulp_of(DType dtype, double value);

}  // namespace dts

// Correctness of one collective call, decided on each rank without communication: every rank
// can generate every rank's input (a pure function of seed, rank and index), so it computes the
// reference for its own output elements and counts what is wrong.
//
// Three kinds of input:
//  - exact: integers chosen so that every partial result of every summation order is
//    representable in the dtype (±1/±2 for prod; for fp8 sums within 16 (e4m3) or 8 (e5m2),
//    check.cpp says how for any rank count); the output must match bit for bit. Integer
//    min/max and data movement draw from the dtype's whole range (unsigned: values above the
//    signed maximum included).
//  - random: floats uniform in [-1, 1) (for prod, sign * [0.5, 2) to stay clear of under/
//    overflow), checked against a long double reference with the bound of random_error_bound();
//    integers uniform over every bit pattern of the dtype, whose sums and products wrap and are
//    checked bit for bit against the same wrapping arithmetic; min/max and data movement must
//    match bit for bit.
//  - overflow: the stated semantics exercised (core/reduce.h): integer sums and products that
//    overflow in every dtype (they must wrap modulo 2^bits), float sums and products that reach
//    ±inf (e4m3, which has no inf: NaN, OCP's non-saturating mode; an inf input is a NaN there),
//    inf - inf and 0 * inf (NaN), products that underflow to a signed zero, NaN inputs to
//    every op (NaN in any input gives NaN, min and max included: IEEE 754-2019 minimum/maximum),
//    and data movement of every bit pattern (NaN payloads, ±inf, -0, subnormals). Each input is
//    chosen so that every combine order gives the same bits: the output must match bit for bit,
//    any NaN standing for NaN. Element i belongs to class i % K of its op (see check.cpp), and
//    the rank holding a class's special value rotates with i, so every rank holds it somewhere.
// A wrong element is classified by what the stack did instead (Deviation): "saturates at 127",
// "NaN dropped by max", "compares u8 as signed", ...
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "core/dtype.h"
#include "results/catalog.h"
#include "suites/collectives/collective.h"

namespace dts {

enum class InputKind : uint8_t { exact, random, overflow };
inline constexpr std::array<InputKind, 3> kAllInputKinds{InputKind::exact, InputKind::random, InputKind::overflow};
std::string_view name(InputKind kind);

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

// One call of spec's collective on `comm` (send_recv: to the next rank, from the previous one);
// in == out, or out inside in (NCCL's in-place layouts), for in place.
void call_collective(Communicator& comm, const CheckSpec& spec, const void* in, void* out);

// Fills rank `rank`'s input buffer (input_elements() elements of spec.dtype).
void fill_input(const CheckSpec& spec, int rank, void* input);
// The stored bits of rank `rank`'s input element `index` (the low 8 * size_of(dtype) bits).
uint64_t input_bits(const CheckSpec& spec, int rank, int64_t index);
// Its value: exact for floats (±inf and NaN included) and for integers up to 2^53 in magnitude.
double input_value(const CheckSpec& spec, int rank, int64_t index);
// Fills a buffer with a recognisable byte pattern, so elements an operation should have written
// but did not are caught.
void fill_sentinel(void* data, int64_t bytes);

// What a stack did at a wrong element, as far as the checker can tell from the element's value,
// its inputs and the stated semantics.
enum class Deviation : uint8_t {
  other,                // none of the below: "wrong value"
  saturates_high,       // integers clamped at the dtype's maximum, floats at the largest finite value
  saturates_low,        // ... at the minimum (the most negative finite value for floats)
  compares_signed,      // min/max of an unsigned dtype gave the signed comparison's answer
  compares_unsigned,    // min/max of a signed dtype gave the unsigned comparison's answer
  nan_dropped,          // a NaN input, and the result is not NaN
  inf_dropped,          // min/max: ±inf is due, a finite value came back
  avg_divides_first,    // avg: the sum overflows to ±inf, the stack's avg is finite (it divided first)
  overflow_lost,        // sum/prod: ±inf is due, a finite value (not the largest) came back
  spurious_overflow,    // the result is finite, the stack gave ±inf
  nan_for_inf,          // ±inf is due, the stack gave NaN
  inf_for_nan,          // NaN is due (inf - inf, 0 * inf), the stack gave ±inf
  zero_sign_lost,       // -0 is due and +0 came back, or the reverse
  nan_payload_changed,  // data movement: a NaN arrived with other bits
  subnormal_flushed,    // data movement: a subnormal arrived as zero
  saturates_partially,  // 8-bit sum/avg: some partial sums saturated, others wrapped (at most 4 ranks)
};
inline constexpr size_t kDeviationCount = 16;
using DeviationCounts = std::array<int64_t, kDeviationCount>;

// "saturates at 127", "NaN dropped by max", "compares u8 as signed", "wrong value", ...
std::string describe(Deviation deviation, DType dtype, ReduceOp op, bool reducing);
// "saturates at 127: 6, NaN dropped by max: 2" (elements), most frequent first; "" when none.
std::string describe(const DeviationCounts& counts, DType dtype, ReduceOp op, bool reducing);
// Every kind describe() can name but "wrong value" (which is no classification), once per dtype
// and redop ("none": data movement) that can carry it: what an expectation may waive.
std::vector<DeviationKind> deviation_vocabulary();

struct CheckResult {
  int64_t checked = 0;
  int64_t wrong = 0;
  double max_ulp = 0;       // largest |got - reference| in units in the last place of the dtype
  std::string first_wrong;  // "rank 1 element 17: got 3 expected 5 (wrong value)"
  DeviationCounts deviations{};  // wrong elements by what the stack did
  // Data movement (all_gather, broadcast, all_to_all, send_recv): wrong elements by the rank whose
  // input they carry, known from their place in the output (world_size entries). Empty for the
  // reductions, where every rank's input is in every element: a wrong value there cannot say
  // whose contribution was wrong, only where it arrived.
  std::vector<int64_t> wrong_from;
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

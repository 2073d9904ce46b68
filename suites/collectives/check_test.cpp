// The collectives checker against a host simulation of each collective: a correct result
// passes, and each fault the suite exists to catch (a flipped bit, a missing rank, a stale
// buffer, an unwritten element) is counted as wrong. Also: exact inputs really are exact in
// every summation order, the random-input bound is what check.h states, the overflow inputs
// overflow in every dtype and give the same bits in every order, and a stack that saturates,
// drops NaN, compares with the wrong signedness, divides before summing or rewrites bits in
// transit fails with a detail that names what it did.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/element.h"
#include "core/error.h"
#include "core/reduce.h"
#include "suites/collectives/check.h"

namespace dts {
namespace {

using Bytes = std::vector<unsigned char>;

Bytes input_of(const CheckSpec& s, int rank) {
  Bytes b(static_cast<size_t>(input_elements(s)) * size_of(s.dtype));
  fill_input(s, rank, b.data());
  return b;
}

// acc[i] = acc[i] OP in[i] for `count` elements: core/reduce.h's, or a misbehaving stack's.
using Combine = std::function<void(DType, ReduceOp, void* acc, const void* in, size_t count)>;

// Host model of rank `rank`'s output: reductions combine ranks in `order` (as a ring or a tree
// would, one rounding per combine, core/reduce.h semantics unless `combine` says otherwise).
Bytes simulate(const CheckSpec& s, int rank, const std::vector<int>& order, const Combine& combine = reduce_into) {
  const size_t esize = size_of(s.dtype);
  const auto count = static_cast<size_t>(s.count);
  const int n = s.world_size;
  Bytes out(static_cast<size_t>(output_elements(s)) * esize);
  if (out.empty()) return out;  // 0 elements: no storage, and memcpy(nullptr, _, 0) is undefined
  std::vector<Bytes> in;
  for (int r = 0; r < n; ++r) in.push_back(input_of(s, r));
  switch (s.collective) {
    case Collective::all_reduce:
    case Collective::reduce:
    case Collective::reduce_scatter: {
      const size_t offset = s.collective == Collective::reduce_scatter ? static_cast<size_t>(rank) * count * esize : 0;
      std::memcpy(out.data(), in[static_cast<size_t>(order[0])].data() + offset, count * esize);
      for (size_t k = 1; k < order.size(); ++k) {
        combine(s.dtype, s.op, out.data(), in[static_cast<size_t>(order[k])].data() + offset, count);
      }
      if (s.op == ReduceOp::avg) divide_by(s.dtype, out.data(), count, n);
      break;
    }
    case Collective::all_gather:
      for (int r = 0; r < n; ++r) std::memcpy(out.data() + static_cast<size_t>(r) * count * esize, in[static_cast<size_t>(r)].data(), count * esize);
      break;
    case Collective::broadcast: std::memcpy(out.data(), in[static_cast<size_t>(s.root)].data(), count * esize); break;
    case Collective::all_to_all:
      for (int p = 0; p < n; ++p) {
        std::memcpy(out.data() + static_cast<size_t>(p) * count * esize,
                    in[static_cast<size_t>(p)].data() + static_cast<size_t>(rank) * count * esize, count * esize);
      }
      break;
    case Collective::send_recv:
      std::memcpy(out.data(), in[static_cast<size_t>((rank - 1 + n) % n)].data(), count * esize);
      break;
  }
  return out;
}

std::vector<int> forward(int n) {
  std::vector<int> o;
  for (int r = 0; r < n; ++r) o.push_back(r);
  return o;
}
std::vector<int> backward(int n) {
  std::vector<int> o;
  for (int r = n - 1; r >= 0; --r) o.push_back(r);
  return o;
}

std::vector<DType> every_dtype() {
  // One push_back at a time: GCC 12 at -O3 misreports vector::insert of a range as out of bounds.
  std::vector<DType> all;
  for (DType d : kAllDTypes) all.push_back(d);
  for (DType d : kFp8DTypes) all.push_back(d);
  return all;
}

// Every collective, dtype (fp8 too), op and rank count 1..4 at counts 0, 1 and 37 (odd, not
// divisible by 2, 3 or 4): the simulated result in two different combine orders passes the check.
TEST(Check, CorrectResultsPassInAnyOrder) {
  for (Collective c : kAllCollectives) {
    for (DType d : every_dtype()) {
      for (ReduceOp op : kAllReduceOps) {
        if (!is_reducing(c) && op != ReduceOp::sum) continue;
        for (int n = 1; n <= 4; ++n) {
          for (int64_t count : {0, 1, 37}) {
            for (InputKind kind : kAllInputKinds) {
              const CheckSpec s{c, d, op, n - 1, count, n, 42, kind};
              for (const auto& order : {forward(n), backward(n)}) {
                for (int rank = 0; rank < n; ++rank) {
                  const Bytes out = simulate(s, rank, order);
                  const CheckResult r = check_output(s, rank, out.data());
                  ASSERT_EQ(r.wrong, 0) << name(c) << " " << name(d) << " " << name(op) << " n=" << n << " count=" << count
                                        << " kind=" << static_cast<int>(kind) << " rank=" << rank << ": " << r.first_wrong;
                  if (kind != InputKind::random) {
                    EXPECT_EQ(r.max_ulp, 0);
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST(Check, FlippedLowBitIsCaughtByExactInputs) {
  for (DType d : every_dtype()) {
    const CheckSpec s{Collective::all_reduce, d, ReduceOp::sum, -1, 37, 3, 7, InputKind::exact};
    Bytes out = simulate(s, 1, forward(3));
    out[size_of(d) * 18] ^= 1;  // bit 0 of element 18 (little endian): the smallest possible change
    const CheckResult r = check_output(s, 1, out.data());
    EXPECT_EQ(r.wrong, 1) << name(d);
    EXPECT_NE(r.first_wrong.find("element 18"), std::string::npos) << r.first_wrong;
  }
}

TEST(Check, MissingRankIsCaught) {
  // Sum without rank 2's contribution: the exact inputs are nonzero for most elements.
  for (DType d : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) {
      const CheckSpec s{Collective::all_reduce, d, op, -1, 64, 3, 9, InputKind::exact};
      // As if rank 2 never contributed (for avg: a two-rank sum divided by 3).
      const Bytes out = simulate(s, 0, {0, 1});
      const CheckResult r = check_output(s, 0, out.data());
      EXPECT_GT(r.wrong, 0) << name(d) << " " << name(op);
    }
  }
}

TEST(Check, StaleResultFromOtherInputsIsCaught) {
  // A buffer holding the result of a call with other inputs (another seed): wrong almost everywhere.
  const CheckSpec now{Collective::all_gather, DType::f32, ReduceOp::sum, -1, 100, 4, 11, InputKind::exact};
  CheckSpec before = now;
  before.seed = 12;
  const Bytes stale = simulate(before, 3, forward(4));
  EXPECT_GT(check_output(now, 3, stale.data()).wrong, 390);  // 400 elements; a few may coincide
}

TEST(Check, UnwrittenOutputIsCaught) {
  const CheckSpec s{Collective::broadcast, DType::bf16, ReduceOp::sum, 0, 50, 2, 5, InputKind::exact};
  Bytes out(50 * 2);
  fill_sentinel(out.data(), static_cast<int64_t>(out.size()));
  EXPECT_EQ(check_output(s, 1, out.data()).wrong, 50);
}

TEST(Check, RandomBoundIsTheStatedFormula) {
  // f32 sum over 4 ranks: (ceil(log2 4) + 1) * 2^-23 * sum|x| + 2^-149.
  EXPECT_DOUBLE_EQ(random_error_bound(DType::f32, ReduceOp::sum, 4, 2.0, 0.5), 3 * 0x1p-23 * 2.0 + 0x1p-149);
  // 3 ranks round like 4: ceil(log2 3) = 2.
  EXPECT_DOUBLE_EQ(random_error_bound(DType::f16, ReduceOp::sum, 3, 1.0, 0.0), 3 * 0x1p-10 + 0x1p-24);
  // One rank: only the final rounding.
  EXPECT_DOUBLE_EQ(random_error_bound(DType::bf16, ReduceOp::prod, 1, 0.0, 2.0), 0x1p-7 * 2.0 + 0x1p-133);
  EXPECT_EQ(random_error_bound(DType::i32, ReduceOp::sum, 4, 10, 10), 0);
  EXPECT_EQ(random_error_bound(DType::f64, ReduceOp::max, 4, 10, 10), 0);
}

TEST(Check, RandomInputsFailPastTheBound) {
  const CheckSpec s{Collective::all_reduce, DType::f32, ReduceOp::sum, -1, 16, 4, 3, InputKind::random};
  Bytes out = simulate(s, 0, forward(4));
  float v;
  std::memcpy(&v, out.data() + 4 * 5, 4);
  // Four ranks of values in [-1, 1): sum|x| <= 4, so the bound is at most 3 * 2^-23 * 4 + eta,
  // about 1.4e-6; a 1e-3 error is far past it.
  v += 1e-3f;
  std::memcpy(out.data() + 4 * 5, &v, 4);
  EXPECT_EQ(check_output(s, 0, out.data()).wrong, 1);
}

TEST(Check, UlpOfMatchesTheFormats) {
  EXPECT_EQ(ulp_of(DType::f32, 1.0), 0x1p-23);
  EXPECT_EQ(ulp_of(DType::f32, 1.5), 0x1p-23);
  EXPECT_EQ(ulp_of(DType::f64, 2.0), 0x1p-51);
  EXPECT_EQ(ulp_of(DType::f16, 0.0), 0x1p-24);  // smallest subnormal
  EXPECT_EQ(ulp_of(DType::f16, 1024.0), 1.0);
  EXPECT_EQ(ulp_of(DType::bf16, 1.0), 0x1p-7);
  EXPECT_EQ(ulp_of(DType::i8, 5.0), 1.0);
}

TEST(Check, ReduceChecksOnlyTheRoot) {
  const CheckSpec s{Collective::reduce, DType::i32, ReduceOp::max, 1, 8, 3, 1, InputKind::exact};
  Bytes garbage(8 * 4, 0xff);
  EXPECT_EQ(check_output(s, 0, garbage.data()).checked, 0);  // non-root output is undefined
  EXPECT_EQ(check_output(s, 1, garbage.data()).wrong, 8);
}

// --- the overflow set ------------------------------------------------------------------------

constexpr std::array<DType, 6> kIntegerDTypes{DType::i8, DType::u8, DType::i32, DType::u32, DType::i64, DType::u64};
constexpr std::array<DType, 4> kFloatDTypes{DType::f32, DType::f64, DType::f16, DType::bf16};

// The largest value of an integer dtype, as a long double (exact for 64-bit values: 64-bit
// significand).
long double integer_max(DType d) {
  return visit_dtype(d, [](auto tag) -> long double {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) return static_cast<long double>(std::numeric_limits<T>::max());
    return 0;
  });
}

// Integer sums and products leave the range in every dtype and at every rank count from 2: class
// 0 of sum holds MAX on every rank, class 0 of prod 2^(bits/2) (the product is at least 2^bits).
TEST(Overflow, IntegerSumsAndProductsOverflowInEveryDType) {
  for (DType d : kIntegerDTypes) {
    for (int n = 2; n <= 4; ++n) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod}) {
        const CheckSpec s{Collective::all_reduce, d, op, -1, 4, n, 5, InputKind::overflow};
        long double exact = op == ReduceOp::sum ? 0 : 1;
        for (int r = 0; r < n; ++r) {
          const long double x = input_value(s, r, 0);  // element 0: class 0
          exact = op == ReduceOp::sum ? exact + x : exact * x;
        }
        EXPECT_GT(exact, integer_max(d)) << name(d) << " " << name(op) << " n=" << n;
      }
    }
  }
}

// Float sums reach +inf from 3 ranks (every rank H, half the largest finite value) and products
// from 2 (G with G^2 past it), in the order core/reduce combines them.
TEST(Overflow, FloatSumsAndProductsReachInfinity) {
  for (DType d : kFloatDTypes) {
    for (int n = 3; n <= 4; ++n) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::avg}) {
        const CheckSpec s{Collective::all_reduce, d, op, -1, 5, n, 5, InputKind::overflow};
        const Bytes out = simulate(s, 0, forward(n));
        EXPECT_EQ(load_double(d, out.data(), 0), std::numeric_limits<double>::infinity()) << name(d) << " " << name(op);
        // Class 1: -inf (every rank -H for sums, one -G for products).
        EXPECT_EQ(load_double(d, out.data(), 1), -std::numeric_limits<double>::infinity()) << name(d) << " " << name(op);
      }
    }
  }
}

// Unsigned inputs reach past the signed maximum (a stack that treats u32 as i32 is seen), and
// every input set's integers span the whole range where no partial result can leave it.
TEST(Overflow, UnsignedInputsUseValuesAboveTheSignedMaximum) {
  for (DType d : {DType::u8, DType::u32, DType::u64}) {
    const long double signed_max = integer_max(d) / 2;  // 2^(bits-1) - 1/2
    for (InputKind kind : kAllInputKinds) {
      const CheckSpec s{Collective::all_reduce, d, ReduceOp::max, -1, 256, 3, 5, kind};
      int above = 0;
      for (int64_t i = 0; i < s.count; ++i) above += static_cast<long double>(input_value(s, 1, i)) > signed_max;
      // Uniform over the range, about half of 256 lie above; 32 is far below any plausible draw.
      EXPECT_GT(above, 32) << name(d) << " " << name(kind);
    }
  }
}

// NaN reaches min and max from every rank: element i of class 0 holds NaN on rank (i / 4) % n.
TEST(Overflow, NaNVisitsEveryRankForMinAndMax) {
  for (int n = 1; n <= 4; ++n) {
    const CheckSpec s{Collective::all_reduce, DType::f32, ReduceOp::max, -1, 4 * n, n, 5, InputKind::overflow};
    for (int r = 0; r < n; ++r) EXPECT_TRUE(std::isnan(input_value(s, r, 4 * r))) << "rank " << r;
  }
}

// --- what a misbehaving stack did, named -----------------------------------------------------

// A stack whose integer sums and products clamp at the dtype's range and whose floats clamp at
// the largest finite value: written here apart from the checker, so the two do not share a bug.
void saturating_combine(DType d, ReduceOp op, void* acc, const void* in, size_t count) {
  visit_dtype(d, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* a = static_cast<T*>(acc);
    const T* b = static_cast<const T*>(in);
    for (size_t i = 0; i < count; ++i) {
      if constexpr (std::is_integral_v<T>) {
        const long double lo = static_cast<long double>(std::numeric_limits<T>::lowest());
        const long double hi = static_cast<long double>(std::numeric_limits<T>::max());
        const long double x = a[i], y = b[i];
        long double r = op == ReduceOp::prod ? x * y : op == ReduceOp::min ? std::min(x, y)
                        : op == ReduceOp::max ? std::max(x, y) : x + y;
        r = std::clamp(r, lo, hi);
        a[i] = static_cast<T>(r);
      } else {
        reduce_into(d, op, &a[i], &b[i], 1);
        const double v = static_cast<double>(a[i]);
        if (std::isinf(v) && std::isfinite(static_cast<double>(b[i]))) {
          const double largest = d == DType::f32 ? std::numeric_limits<float>::max() : std::numeric_limits<double>::max();
          a[i] = T(v > 0 ? largest : -largest);
        }
      }
    }
  });
}

// A stack whose 8-bit sums saturate in some additions and wrap in others (vector code for part
// of the buffer, scalar code for the rest, as Open MPI's): a tree (r0 + r1) + (r2 + r3), the left
// pair added saturating, the right pair wrapping, the root saturating; at 3 ranks (r0 + r1) + r2,
// saturating then wrapping. Written apart from the checker's search.
Bytes mixed_saturation(const CheckSpec& s) {
  const auto at = [&](int r, int64_t i) { return static_cast<int>(static_cast<int8_t>(input_of(s, r)[static_cast<size_t>(i)])); };
  const auto sat = [](int v) { return std::clamp(v, -128, 127); };
  const auto wrap = [](int v) { return static_cast<int>(static_cast<int8_t>(static_cast<uint8_t>(v & 0xff))); };
  Bytes out(static_cast<size_t>(s.count));
  for (int64_t i = 0; i < s.count; ++i) {
    int v = s.world_size == 4 ? sat(sat(at(0, i) + at(1, i)) + wrap(at(2, i) + at(3, i)))
                              : wrap(sat(at(0, i) + at(1, i)) + at(2, i));
    if (s.op == ReduceOp::avg) v /= s.world_size;  // truncating toward zero, as the stated avg
    out[static_cast<size_t>(i)] = static_cast<uint8_t>(v & 0xff);
  }
  return out;
}

TEST(Deviations, PartialSaturationIsNamedAndAnotherFaultBesideItIsNot) {
  for (int n : {3, 4}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
      for (InputKind kind : {InputKind::random, InputKind::overflow}) {
        const CheckSpec s{Collective::all_reduce, DType::i8, op, -1, 512, n, 11, kind};
        Bytes out = mixed_saturation(s);
        const CheckResult r = check_output(s, 0, out.data());
        const std::string named = describe(r.deviations, s.dtype, s.op, true);
        // Some elements wrong (the inputs overflow), every one named: none is "wrong value".
        EXPECT_GT(r.wrong, 0) << n;
        EXPECT_EQ(r.deviations[static_cast<size_t>(Deviation::other)], 0) << n << " " << named << "; " << r.first_wrong;
        EXPECT_GT(r.deviations[static_cast<size_t>(Deviation::saturates_partially)], 0) << named;
        EXPECT_NE(named.find(op == ReduceOp::sum ? "a partial sum saturates" : "a partial avg saturates"), std::string::npos) << named;
        // A bit flipped on top (bit 6 of every 16th element: a value no tree of these inputs
        // reaches, for most elements) is still a wrong value, so an expectation of the
        // saturation cannot hide it.
        for (size_t i = 0; i < out.size(); i += 16) out[i] ^= 0x40;
        const CheckResult flipped = check_output(s, 0, out.data());
        EXPECT_GT(flipped.deviations[static_cast<size_t>(Deviation::other)], 0) << describe(flipped.deviations, s.dtype, s.op, true);
      }
    }
  }
}

TEST(Deviations, SaturationIsNamedWithTheBound) {
  for (int n = 2; n <= 4; ++n) {
    const CheckSpec i8{Collective::all_reduce, DType::i8, ReduceOp::sum, -1, 64, n, 5, InputKind::overflow};
    const CheckResult r = check_output(i8, 0, simulate(i8, 0, forward(n), saturating_combine).data());
    EXPECT_GT(r.deviations[static_cast<size_t>(Deviation::saturates_high)], 0) << describe(r.deviations, i8.dtype, i8.op, true);
    EXPECT_GT(r.deviations[static_cast<size_t>(Deviation::saturates_low)], 0) << describe(r.deviations, i8.dtype, i8.op, true);
    EXPECT_NE(describe(r.deviations, i8.dtype, i8.op, true).find("saturates at 127"), std::string::npos);
    EXPECT_NE(describe(r.deviations, i8.dtype, i8.op, true).find("saturates at -128"), std::string::npos);
    EXPECT_NE(r.first_wrong.find("(saturates at"), std::string::npos) << r.first_wrong;
  }
  // avg: a clamped sum divided by n is named as the clamp, never as "wrong value".
  const CheckSpec avg{Collective::all_reduce, DType::i8, ReduceOp::avg, -1, 64, 2, 5, InputKind::overflow};
  const CheckResult averaged = check_output(avg, 0, simulate(avg, 0, forward(2), saturating_combine).data());
  EXPECT_GT(averaged.deviations[static_cast<size_t>(Deviation::saturates_high)], 0);
  EXPECT_EQ(averaged.deviations[static_cast<size_t>(Deviation::other)], 0) << averaged.first_wrong;
  // Floats: 3 ranks of H overflow; the clamped result is the largest finite value.
  const CheckSpec f32{Collective::all_reduce, DType::f32, ReduceOp::sum, -1, 64, 3, 5, InputKind::overflow};
  const CheckResult r = check_output(f32, 0, simulate(f32, 0, forward(3), saturating_combine).data());
  EXPECT_GT(r.deviations[static_cast<size_t>(Deviation::saturates_high)], 0);
  EXPECT_NE(describe(r.deviations, f32.dtype, f32.op, true).find("saturates at 3.40282347e+38"), std::string::npos)
      << describe(r.deviations, f32.dtype, f32.op, true);
  // The exact set sees nothing: its partial results never leave the range.
  CheckSpec exact = f32;
  exact.kind = InputKind::exact;
  EXPECT_EQ(check_output(exact, 0, simulate(exact, 0, forward(3), saturating_combine).data()).wrong, 0);
}

TEST(Deviations, NaNDroppedByMinAndMax) {
  // fmin/fmax: a NaN operand is ignored (C's functions, NCCL's float min/max).
  const Combine fmin_fmax = [](DType d, ReduceOp op, void* acc, const void* in, size_t count) {
    auto* a = static_cast<float*>(acc);
    const auto* b = static_cast<const float*>(in);
    ASSERT_EQ(d, DType::f32);
    for (size_t i = 0; i < count; ++i) a[i] = op == ReduceOp::min ? std::fmin(a[i], b[i]) : std::fmax(a[i], b[i]);
  };
  for (int n = 2; n <= 4; ++n) {
    for (ReduceOp op : {ReduceOp::min, ReduceOp::max}) {
      const CheckSpec s{Collective::all_reduce, DType::f32, op, -1, 64, n, 5, InputKind::overflow};
      const CheckResult r = check_output(s, 0, simulate(s, 0, forward(n), fmin_fmax).data());
      // Class 0 (every 4th element) holds one NaN: 16 of 64 elements, all dropped.
      EXPECT_EQ(r.deviations[static_cast<size_t>(Deviation::nan_dropped)], 16) << describe(r.deviations, s.dtype, op, true);
      EXPECT_EQ(r.wrong, 16);
      EXPECT_NE(r.first_wrong.find("NaN dropped by " + std::string(name(op))), std::string::npos) << r.first_wrong;
    }
  }
}

TEST(Deviations, UnsignedComparedAsSigned) {
  // As MPICH 4.0's MPI_UINT8_T min and max were seen to do: the signed comparison's answer.
  const Combine signed_compare = [](DType, ReduceOp op, void* acc, const void* in, size_t count) {
    auto* a = static_cast<uint8_t*>(acc);
    const auto* b = static_cast<const uint8_t*>(in);
    for (size_t i = 0; i < count; ++i) {
      const auto x = static_cast<int8_t>(a[i]), y = static_cast<int8_t>(b[i]);
      a[i] = static_cast<uint8_t>(op == ReduceOp::min ? std::min(x, y) : std::max(x, y));
    }
  };
  for (InputKind kind : kAllInputKinds) {
    const CheckSpec s{Collective::all_reduce, DType::u8, ReduceOp::max, -1, 64, 2, 5, kind};
    const CheckResult r = check_output(s, 0, simulate(s, 0, forward(2), signed_compare).data());
    EXPECT_GT(r.wrong, 0) << name(kind);
    EXPECT_EQ(r.deviations[static_cast<size_t>(Deviation::compares_signed)], r.wrong) << name(kind);
    EXPECT_NE(r.first_wrong.find("compares u8 as signed"), std::string::npos) << r.first_wrong;
  }
}

TEST(Deviations, AvgThatDividesBeforeSumming) {
  // sum(x / n): finite where the stated sum-then-divide overflows (NCCL's float avg premultiplies).
  const CheckSpec s{Collective::all_reduce, DType::f64, ReduceOp::avg, -1, 10, 3, 5, InputKind::overflow};
  Bytes out(10 * 8);
  for (int64_t i = 0; i < 10; ++i) {
    double acc = 0;
    for (int r = 0; r < 3; ++r) acc += input_value(s, r, i) / 3;
    std::memcpy(out.data() + i * 8, &acc, 8);
  }
  const CheckResult r = check_output(s, 0, out.data());
  EXPECT_EQ(r.deviations[static_cast<size_t>(Deviation::avg_divides_first)], 4);  // classes 0 and 1 of 10 elements
  EXPECT_NE(describe(r.deviations, s.dtype, s.op, true).find("divides before summing"), std::string::npos);
}

TEST(Deviations, DataMovementKeepsEveryBitPattern) {
  // Every f32 bit pattern travels; a stack that canonicalises NaNs or flushes subnormals is named.
  const CheckSpec s{Collective::broadcast, DType::f32, ReduceOp::sum, 0, 4096, 2, 5, InputKind::overflow};
  Bytes out = simulate(s, 1, forward(2));
  int nans = 0, subnormals = 0;
  for (int64_t i = 0; i < s.count; ++i) {
    float v;
    std::memcpy(&v, out.data() + i * 4, 4);
    if (std::isnan(v)) {
      v = std::numeric_limits<float>::quiet_NaN();
      ++nans;
    } else if (std::fpclassify(v) == FP_SUBNORMAL) {
      v = 0;
      ++subnormals;
    }
    std::memcpy(out.data() + i * 4, &v, 4);
  }
  // Random 32-bit patterns: 2^-8 are NaN or inf and 2^-8 subnormal or zero, about 16 of 4096
  // each; the canonical NaN itself may come up, so at least one must have changed.
  ASSERT_GT(nans, 0);
  ASSERT_GT(subnormals, 0);
  const CheckResult r = check_output(s, 1, out.data());
  EXPECT_GT(r.deviations[static_cast<size_t>(Deviation::nan_payload_changed)], 0);
  EXPECT_EQ(r.deviations[static_cast<size_t>(Deviation::subnormal_flushed)], subnormals);
}

TEST(Deviations, CountsAreDescribedMostFrequentFirst) {
  DeviationCounts counts{};
  counts[static_cast<size_t>(Deviation::nan_dropped)] = 2;
  counts[static_cast<size_t>(Deviation::saturates_high)] = 6;
  EXPECT_EQ(describe(counts, DType::i8, ReduceOp::max, true), "saturates at 127: 6, NaN dropped by max: 2");
  EXPECT_EQ(describe(DeviationCounts{}, DType::i8, ReduceOp::max, true), "");
  EXPECT_EQ(describe(Deviation::saturates_low, DType::u32, ReduceOp::sum, true), "saturates at 0");
  EXPECT_EQ(describe(Deviation::saturates_high, DType::u64, ReduceOp::sum, true), "saturates at 18446744073709551615");
}

// fp8 exact sums past 2^p ranks (16 for e4m3, 8 for e5m2): only some ranks contribute to an
// element, so every partial sum of every order still lies within the integers the format holds.
TEST(Fp8, ExactSumsStayExactAtAnyRankCount) {
  for (DType d : kFp8DTypes) {
    const double exact_limit = d == DType::f8e4m3 ? 16 : 8;  // 2^p: p = 4 (e4m3), 3 (e5m2)
    for (int n : {5, 9, 16, 17, 33, 100}) {
      const CheckSpec s{Collective::all_reduce, d, ReduceOp::sum, -1, 37, n, 11, InputKind::exact};
      double largest_sum = 0;
      for (int64_t i = 0; i < s.count; ++i) {
        double sum_abs = 0;
        for (int r = 0; r < n; ++r) sum_abs += std::fabs(input_value(s, r, i));
        largest_sum = std::max(largest_sum, sum_abs);
      }
      EXPECT_LE(largest_sum, exact_limit) << name(d) << " n=" << n;
      EXPECT_GT(largest_sum, 0) << name(d) << " n=" << n;
      for (const auto& order : {forward(n), backward(n)}) {
        EXPECT_EQ(check_output(s, 0, simulate(s, 0, order).data()).wrong, 0) << name(d) << " n=" << n;
      }
    }
  }
}

// NCCL's fp8 kernels, modelled apart from the checker: the exact result converted saturating
// (cuda_fp8.h's __NV_SATFINITE: past the largest finite value, ±inf included, to ±largest).
void satfinite_combine(DType d, ReduceOp op, void* acc, const void* in, size_t count) {
  auto* a = static_cast<uint8_t*>(acc);
  const auto* b = static_cast<const uint8_t*>(in);
  const bool e4m3 = d == DType::f8e4m3;
  for (size_t i = 0; i < count; ++i) {
    if (op == ReduceOp::min || op == ReduceOp::max) {
      reduce_into(d, op, &a[i], &b[i], 1);
      continue;
    }
    const double x = e4m3 ? double_from_f8e4m3_bits(a[i]) : double_from_f8e5m2_bits(a[i]);
    const double y = e4m3 ? double_from_f8e4m3_bits(b[i]) : double_from_f8e5m2_bits(b[i]);
    const double r = op == ReduceOp::prod ? x * y : x + y;
    a[i] = e4m3 ? f8e4m3_bits_from_double(r, Fp8Overflow::saturating) : f8e5m2_bits_from_double(r, Fp8Overflow::saturating);
  }
}

TEST(Fp8, SaturationIsNamedWithTheLargestValue) {
  // 448 = 1.75 * 2^8 and 57344 = 1.75 * 2^15: each format's largest finite value.
  for (const auto& [d, bound] : {std::pair{DType::f8e4m3, std::string("448")}, std::pair{DType::f8e5m2, std::string("57344")}}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod}) {
      const CheckSpec s{Collective::all_reduce, d, op, -1, 64, 3, 5, InputKind::overflow};
      const CheckResult r = check_output(s, 0, simulate(s, 0, forward(3), satfinite_combine).data());
      const std::string text = describe(r.deviations, d, op, true);
      EXPECT_NE(text.find("saturates at " + bound), std::string::npos) << name(d) << " " << name(op) << ": " << text;
      EXPECT_NE(text.find("saturates at -" + bound), std::string::npos) << name(d) << " " << name(op) << ": " << text;
      CheckSpec exact = s;
      exact.kind = InputKind::exact;  // never leaves the range: sees nothing
      EXPECT_EQ(check_output(exact, 0, simulate(exact, 0, forward(3), satfinite_combine).data()).wrong, 0);
    }
  }
}

}  // namespace
}  // namespace dts

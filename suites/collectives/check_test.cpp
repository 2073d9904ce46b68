// The collectives checker against a host simulation of each collective: a correct result
// passes, and each fault the suite exists to catch (a flipped bit, a missing rank, a stale
// buffer, an unwritten element) is counted as wrong. Also: exact inputs really are exact in
// every summation order, and the random-input bound is what check.h states.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

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

// Host model of rank `rank`'s output: reductions combine ranks in `order` (as a ring or a tree
// would, one rounding per combine, core/reduce.h semantics).
Bytes simulate(const CheckSpec& s, int rank, const std::vector<int>& order) {
  const size_t esize = size_of(s.dtype);
  const auto count = static_cast<size_t>(s.count);
  const int n = s.world_size;
  Bytes out(static_cast<size_t>(output_elements(s)) * esize);
  std::vector<Bytes> in;
  for (int r = 0; r < n; ++r) in.push_back(input_of(s, r));
  switch (s.collective) {
    case Collective::all_reduce:
    case Collective::reduce:
    case Collective::reduce_scatter: {
      const size_t offset = s.collective == Collective::reduce_scatter ? static_cast<size_t>(rank) * count * esize : 0;
      std::memcpy(out.data(), in[static_cast<size_t>(order[0])].data() + offset, count * esize);
      for (size_t k = 1; k < order.size(); ++k) {
        reduce_into(s.dtype, s.op, out.data(), in[static_cast<size_t>(order[k])].data() + offset, count);
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

// Every collective, dtype, op and rank count 1..4 at counts 0, 1 and 37 (odd, not divisible by
// 2, 3 or 4): the simulated result in two different combine orders passes the check.
TEST(Check, CorrectResultsPassInAnyOrder) {
  for (Collective c : kAllCollectives) {
    for (DType d : kAllDTypes) {
      for (ReduceOp op : kAllReduceOps) {
        if (!is_reducing(c) && op != ReduceOp::sum) continue;
        for (int n = 1; n <= 4; ++n) {
          for (int64_t count : {0, 1, 37}) {
            for (InputKind kind : {InputKind::exact, InputKind::random}) {
              const CheckSpec s{c, d, op, n - 1, count, n, 42, kind};
              for (const auto& order : {forward(n), backward(n)}) {
                for (int rank = 0; rank < n; ++rank) {
                  const Bytes out = simulate(s, rank, order);
                  const CheckResult r = check_output(s, rank, out.data());
                  ASSERT_EQ(r.wrong, 0) << name(c) << " " << name(d) << " " << name(op) << " n=" << n << " count=" << count
                                        << " kind=" << static_cast<int>(kind) << " rank=" << rank << ": " << r.first_wrong;
                  if (kind == InputKind::exact) {
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
  for (DType d : kAllDTypes) {
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

}  // namespace
}  // namespace dts

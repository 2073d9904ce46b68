// The collectives checker over real stacks under mpirun (NP 1-4): every input set (exact, random,
// overflow) of every dtype passes where the stack's arithmetic is dtsuite's own (core/reduce.h):
// the reductions ring, tree and hier compute themselves, and mpi's f16/bf16 user ops; data
// movement keeps every bit pattern on every stack. The MPI library's own arithmetic is judged by
// the suite's runs, not here: it differs between libraries (Open MPI 4.1.4's AVX ops saturate
// 8-bit sums and its float min/max drop NaN; MPICH 4.0.2 compares unsigned values as signed),
// and each such case is a FAIL there that names what the library did (README).
//   ctest -R collectives_check_mpi_test
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "suites/collectives/check.h"

namespace dts {
namespace {

struct Stack {
  const char* spec;
  std::vector<Collective> reduces_itself;  // its reducing collectives that do not forward to mpi
};

// ring forwards reduce and broadcast to INNER; tree forwards reduce_scatter and all_gather;
// hier's all_reduce on one node is INNER's reduce_scatter, all_reduce and all_gather.
const std::vector<Stack> kStacks{
    {"ring(mpi)", {Collective::all_reduce, Collective::reduce_scatter}},
    {"tree(mpi)", {Collective::all_reduce, Collective::reduce}},
    {"hier(ring(mpi))", {Collective::all_reduce}},
    {"mpi", {Collective::all_reduce, Collective::reduce_scatter, Collective::reduce}},
};

// Where the stack's arithmetic is dtsuite's: mpi reduces f16/bf16 with core/reduce.h user ops.
bool stated_on(const Stack& stack, DType dtype) {
  return std::string(stack.spec) != "mpi" || dtype == DType::f16 || dtype == DType::bf16;
}

// 0 and 1 are the edges; 37 is odd, divisible by no rank count 2-4, and holds every class of
// the overflow set several times.
constexpr int64_t kCounts[] = {0, 1, 37};
constexpr uint64_t kSeed = 2024;  // inputs only need to be reproducible

class CheckedStack : public testing::TestWithParam<Stack> {};

TEST_P(CheckedStack, EveryInputSetPassesWhereTheSemanticsAreStated) {
  const Stack& stack = GetParam();
  CommOptions options;
  options.timeout_seconds = 60;  // a lost message fails the test instead of hanging ctest
  options.chunk_bytes = 64;      // the ring's pipeline runs over several chunks at 37 elements
  const auto comm = make_communicator(stack.spec, options);
  const int n = comm->size(), rank = comm->rank();
  int64_t cases = 0;
  for (Collective c : kAllCollectives) {
    const bool reducing = is_reducing(c);
    if (reducing && std::find(stack.reduces_itself.begin(), stack.reduces_itself.end(), c) == stack.reduces_itself.end()) {
      continue;
    }
    for (DType dtype : kAllDTypes) {
      for (ReduceOp op : kAllReduceOps) {
        if ((!reducing && op != ReduceOp::sum) || (reducing && !stated_on(stack, dtype))) continue;
        for (int root = 0; root < (is_rooted(c) ? n : 1); ++root) {
          for (int64_t count : kCounts) {
            for (InputKind kind : kAllInputKinds) {
              const CheckSpec s{c, dtype, op, root, count, n, kSeed, kind};
              SCOPED_TRACE(std::string(stack.spec) + " " + std::string(name(c)) + "/" + std::string(name(dtype)) + "/" +
                           std::string(name(op)) + " root " + std::to_string(root) + " count " + std::to_string(count) +
                           " " + std::string(name(kind)) + " inputs");
              std::vector<char> in(static_cast<size_t>(input_elements(s)) * size_of(dtype));
              std::vector<char> out(static_cast<size_t>(output_elements(s)) * size_of(dtype));
              fill_input(s, rank, in.data());
              fill_sentinel(out.data(), static_cast<int64_t>(out.size()));
              call_collective(*comm, s, in.data(), out.data());
              const CheckResult r = check_output(s, rank, out.data());
              EXPECT_EQ(r.wrong, 0) << r.first_wrong << "; " << describe(r.deviations, dtype, op, reducing);
              ++cases;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(cases, 0);
  comm->barrier();
}

std::string stack_name(const testing::TestParamInfo<Stack>& stack) {
  std::string name;
  for (const char ch : std::string(stack.param.spec)) name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Stacks, CheckedStack, testing::ValuesIn(kStacks), stack_name);

}  // namespace
}  // namespace dts

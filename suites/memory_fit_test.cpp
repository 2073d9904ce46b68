// Tests of suites/memory_fit.h: the lower bound counts what it says it counts, a workload past
// what a rank has is refused with one line naming both figures, and the available memory is
// bounded by ulimit -v (RLIMIT_AS) as well as by the node.
#include "suites/memory_fit.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <string>

#include "core/error.h"

namespace dts {
namespace {

TEST(MemoryFit, TheLowerBoundCountsParametersBatchAndOutputs) {
  ModelSpec spec;
  spec.layers = 2;
  spec.input = 3;
  spec.width = 4;
  spec.classes = 5;
  // Layers 3 -> 4 -> 5: (3 + 1) x 4 + (4 + 1) x 5 = 41 parameters, as parameter_count says; a
  // batch of 10 rows: 10 x 3 f64 inputs and 10 x (4 + 5) f32 outputs.
  ASSERT_EQ(parameter_count(spec), 41);
  EXPECT_EQ(training_bytes_at_least(spec, 10, 40), 40.0 * 41 + 8 * 10 * 3 + 4 * 10 * 9);
  EXPECT_EQ(training_bytes_at_least(spec, 0, 12), 12.0 * 41);
}

// The issue's --width 100000: ten billion parameters, hundreds of GB; refused, not allocated.
TEST(MemoryFit, AWorkloadPastWhatARankHasIsOneLineNamingBoth) {
  ModelSpec spec;
  spec.width = 100000;
  const double needed = training_bytes_at_least(spec, 64, 40);
  EXPECT_GT(needed, 4e11);  // 40 bytes x 1.0e10 parameters
  try {
    check_fits("equivalence: " + describe_model(spec), needed, "40 bytes a parameter", {16e9, "MemAvailable 32 GB shared by 2 ranks"});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    const std::string what = e.what();
    EXPECT_NE(what.find("a 3-layer MLP of width 100000 (10004400010 parameters) needs at least 400 GB per rank"),
              std::string::npos) << what;
    EXPECT_NE(what.find("a rank here has 16 GB (MemAvailable 32 GB shared by 2 ranks)"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos);
  }
  // A message size's remedy is its own flag, not the model's.
  try {
    check_fits("scaling: the all_reduce of 1.07 PB", 3.2e15, "3 bytes a byte", {16e9, "z"}, "lower --scaling-bytes");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(z): lower --scaling-bytes, or run on more memory"), std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(check_fits("x", 1e9, "y", {16e9, "z"}));
  EXPECT_NO_THROW(check_fits("x", 16e9, "y", {16e9, "z"}));  // exactly what there is: fits
}

TEST(MemoryFit, AnAddressSpaceLimitBoundsWhatARankHas) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's shadow memory takes more address space than any limit leaves";
#endif
  rlimit previous{};
  ASSERT_EQ(::getrlimit(RLIMIT_AS, &previous), 0);
  const MemoryAvailable unlimited = memory_available_per_rank(1);
  EXPECT_GT(unlimited.bytes, 0);
  // Far above what the test uses, far below any node: the limit decides, and says so.
  rlimit limited = previous;
  limited.rlim_cur = rlim_t{64} << 30;
  if (previous.rlim_cur != RLIM_INFINITY && previous.rlim_cur < limited.rlim_cur) GTEST_SKIP() << "already limited";
  ASSERT_EQ(::setrlimit(RLIMIT_AS, &limited), 0);
  const MemoryAvailable bounded = memory_available_per_rank(1);
  ::setrlimit(RLIMIT_AS, &previous);
  EXPECT_LE(bounded.bytes, 64.0 * (1 << 30));
  if (bounded.bytes < unlimited.bytes) {
    EXPECT_NE(bounded.source.find("ulimit -v leaves"), std::string::npos) << bounded.source;
  }
  // Shared by more ranks, each has less.
  EXPECT_LE(memory_available_per_rank(4).bytes, unlimited.bytes);
}

}  // namespace
}  // namespace dts

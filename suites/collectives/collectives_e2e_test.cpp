// End-to-end tests of `dtsuite run collectives` and its three input sets: u32 and u64 pass every
// collective on mpi and ring(mpi) at 1-4 ranks with exact, random and overflow inputs; a stack
// that saturates (faulty(saturate,mpi)) or drops NaN in min/max (faulty(dropnan,mpi)) FAILs with
// a detail naming what it did, where the exact and random inputs alone see nothing; fp8 cases
// SKIP with the backend's own reason.
//   ctest -R collectives_e2e_test
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/buffer.h"
#include "dts/config.h"
#include "harness/testing/e2e.h"
#include "results/csv_reader.h"
#include "results/record.h"

namespace {

namespace fs = std::filesystem;
using namespace dts::e2e;

// Small sizes keep four ranks on two cores to seconds; 0, 1 and 1021 elements run besides.
const std::string kSweep = "-b 8 -e 512 -f 8 -n 1 -w 0";

std::vector<dts::Record> run_collectives(int ranks, const std::string& args, int expected_exit, const std::string& name) {
  const fs::path csv = scratch_dir() / (name + ".csv");
  const RunResult r = run_dtsuite(ranks, "run collectives " + args + " --csv " + csv.string());
  EXPECT_EQ(r.exit_code, expected_exit) << r.err << r.out.substr(0, 4000);
  return dts::read_results_csv(csv.string());
}

std::vector<dts::Record> wrong_rows(const std::vector<dts::Record>& rows) {
  std::vector<dts::Record> out;
  for (const dts::Record& r : rows) {
    if (r.metric == "wrong") out.push_back(r);
  }
  return out;
}

class UnsignedDTypes : public testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(UnsignedDTypes, PassEveryCollectiveOnEveryInputSet) {
  const auto [np, backend] = GetParam();
  // Fixed-width MPI names: Open MPI 4.1.4 compares MPI_UNSIGNED_LONG as signed in min/max
  // (MpiNames below), which is the library's, not this test's, to answer for.
  const auto rows = run_collectives(np, "--backend '" + backend + "' -d u32,u64 --mpi-names fixed " + kSweep, 0,
                                    "unsigned_" + std::to_string(np) + "_" + std::to_string(backend.size()));
  const auto wrong = wrong_rows(rows);
  std::set<std::string> dtypes, ops;
  for (const dts::Record& r : wrong) {
    dtypes.insert(r.labels.dtype);
    ops.insert(r.labels.op);
    EXPECT_EQ(r.verdict, dts::Verdict::pass) << r.case_id << ": " << r.detail;
    for (const char* set : {"exact inputs: 0 wrong", "random inputs: 0 wrong", "overflow inputs: 0 wrong"}) {
      EXPECT_NE(r.detail.find(set), std::string::npos) << r.case_id << ": " << r.detail;
    }
  }
  EXPECT_EQ(dtypes, (std::set<std::string>{"u32", "u64"}));
  EXPECT_EQ(ops.size(), 7u);  // every collective
}

INSTANTIATE_TEST_SUITE_P(RanksAndBackends, UnsignedDTypes,
                         testing::Combine(testing::Values(1, 2, 3, 4), testing::Values("mpi", "ring(mpi)")));

// Backend mpi runs each integer reduction through every MPI name of the dtype's width as well, the
// name in the row's config and case id; sums are exact in any name, so those rows pass whatever the
// library does with min/max. No other backend, --quick and --mpi-names fixed add none.
TEST(MpiNames, EveryNameOfTheWidthRunsAndIsNamed) {
  const std::string args = "-d i32,u64 -o sum,max --collective all_reduce,reduce -b 8 -e 64 -f 8 -n 1 -w 0";
  const auto names_of = [](const std::vector<dts::Record>& rows) {
    std::set<std::string> names;
    for (const dts::Record& r : wrong_rows(rows)) {
      const auto name = dts::config_value(r.labels.config, "mpi_datatype");
      if (!name) continue;
      names.insert(r.labels.dtype + ":" + *name);
      EXPECT_NE(r.case_id.find("/" + *name), std::string::npos) << r.case_id;
      if (r.labels.config.find("redop=sum") != std::string::npos) {
        EXPECT_EQ(r.verdict, dts::Verdict::pass) << r.case_id << ": " << r.detail;
      }
    }
    return names;
  };
  const fs::path csv = scratch_dir() / "mpi_names.csv";
  const RunResult all = run_dtsuite(2, "run collectives " + args + " --csv " + csv.string());
  EXPECT_TRUE(all.exit_code == 0 || all.exit_code == 1) << all.err;  // 1: a library wrong in some name
  std::set<std::string> want{"i32:MPI_INT"};
  if (sizeof(long) == 8) want.insert({"u64:MPI_UNSIGNED_LONG", "u64:MPI_UNSIGNED_LONG_LONG"});
  EXPECT_EQ(names_of(dts::read_results_csv(csv.string())), want);

  EXPECT_TRUE(names_of(run_collectives(2, args + " --mpi-names fixed", 0, "mpi_names_fixed")).empty());
  EXPECT_TRUE(names_of(run_collectives(2, args + " --backend 'ring(mpi)'", 0, "mpi_names_ring")).empty());
  const fs::path quick = scratch_dir() / "mpi_names_quick.csv";
  EXPECT_EQ(run_dtsuite(2, "run collectives --quick " + args + " --csv " + quick.string()).exit_code, 0);
  EXPECT_TRUE(names_of(dts::read_results_csv(quick.string())).empty());
}

// The overflow part of a failing row's detail ("overflow inputs: 6 wrong (...): saturates at 127: 6").
std::string overflow_part(const std::string& detail) {
  const size_t at = detail.find("overflow inputs:");
  return at == std::string::npos ? "" : detail.substr(at, detail.find("; first:", at) - at);
}

TEST(SemanticFaults, SaturationFailsTheOverflowInputsAndIsNamed) {
  for (int np : {2, 3}) {
    const auto rows = run_collectives(
        np, "--backend 'faulty(saturate,mpi)' -d i8,u32,f32 -o sum,prod --collective all_reduce,reduce_scatter " + kSweep,
        1, "saturate_" + std::to_string(np));
    int failed = 0;
    for (const dts::Record& r : wrong_rows(rows)) {
      if (r.verdict != dts::Verdict::fail) continue;
      ++failed;
      // Exact inputs never leave the range: only the other sets can see a clamp.
      EXPECT_NE(r.detail.find("exact inputs: 0 wrong"), std::string::npos) << r.detail;
      // The dtype's own bounds: i8 127 / -128, u32 4294967295 (0 cannot be passed adding or
      // multiplying), f32 ±3.40282347e+38, the largest finite value.
      const std::string overflow = overflow_part(r.detail);
      const std::vector<std::string> bounds = r.labels.dtype == "i8"    ? std::vector<std::string>{"127", "-128"}
                                              : r.labels.dtype == "u32" ? std::vector<std::string>{"4294967295"}
                                                                        : std::vector<std::string>{"3.40282347e+38", "-3.40282347e+38"};
      bool named = false;
      for (const std::string& bound : bounds) named = named || overflow.find("saturates at " + bound) != std::string::npos;
      EXPECT_TRUE(named) << r.case_id << ": " << r.detail;
    }
    // Every case with a count of 1 element or more reduces an overflowing class on the victim.
    EXPECT_GT(failed, 0);
  }
}

TEST(SemanticFaults, DroppedNaNFailsMinAndMaxAndIsNamed) {
  const auto rows = run_collectives(
      3, "--backend 'faulty(dropnan,mpi)' -d f32,f64,bf16 -o min,max,sum --collective all_reduce,reduce " + kSweep, 1,
      "dropnan");
  int failed = 0;
  for (const dts::Record& r : wrong_rows(rows)) {
    const bool min_max = r.labels.config.find("redop=min") != std::string::npos ||
                         r.labels.config.find("redop=max") != std::string::npos;
    if (!min_max) {
      EXPECT_EQ(r.verdict, dts::Verdict::pass) << r.case_id << ": " << r.detail;  // sum does not change
      continue;
    }
    if (r.verdict != dts::Verdict::fail) continue;
    ++failed;
    EXPECT_NE(r.detail.find("exact inputs: 0 wrong"), std::string::npos) << r.detail;
    EXPECT_NE(r.detail.find("random inputs: 0 wrong"), std::string::npos) << r.detail;
    EXPECT_NE(overflow_part(r.detail).find("NaN dropped by m"), std::string::npos) << r.case_id << ": " << r.detail;
  }
  EXPECT_GT(failed, 0);
}

TEST(Fp8, CasesSkipWithTheBackendsReason) {
  for (const std::string backend : {"mpi", "ring(mpi)"}) {
    const auto rows = run_collectives(2, "--backend '" + backend + "' -d f8e4m3,f8e5m2 --collective all_reduce,broadcast " + kSweep,
                                      0, "fp8_" + std::to_string(backend.size()));
    ASSERT_FALSE(rows.empty());
    for (const dts::Record& r : rows) {
      EXPECT_EQ(r.verdict, dts::Verdict::skip) << r.case_id;
      // Counts of 1 element or more reach MPI, which names itself; ring(mpi) sends nothing for 0
      // elements and the suite then says it has no fp8 reference.
      const bool backend_said = r.detail.find("backend mpi has no " + r.labels.dtype) != std::string::npos;
      const bool suite_said = r.detail.find("dtsuite has no " + r.labels.dtype + " reference") != std::string::npos;
      EXPECT_TRUE(backend_said || suite_said) << r.case_id << ": " << r.detail;
      if (backend == "mpi") {
        EXPECT_TRUE(backend_said) << r.case_id << ": " << r.detail;
      }
    }
  }
}

// Where buffers live is the backend's to say. --device cuda asks for device memory, which a host
// backend (mpi) cannot take: one line naming the device backends that can, exit 2, before any case
// runs, so no CSV claims a result (it was every case SKIP and exit 0, a green run that ran nothing).
TEST(DeviceMemory, CudaOnAHostBackendIsAUsageErrorNamingStaged) {
  const fs::path csv = scratch_dir() / "device_cuda_mpi.csv";
  const RunResult r = run_dtsuite(2, "run collectives --backend mpi --device cuda -d f32 --collective all_reduce " +
                                         kSweep + " --csv " + csv.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("dtsuite: error: backend mpi takes host memory; --device cuda needs a device backend: nccl "
                       "(one GPU per rank) or staged(mpi)"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(csv));
}

// Without --device the backend decides: mpi takes host memory, so the cases run on the CPU.
TEST(DeviceMemory, WithoutTheFlagTheBackendDecides) {
  const auto rows = run_collectives(2, "--backend mpi -d f32 -o sum --collective all_reduce " + kSweep, 0, "device_auto");
  ASSERT_FALSE(rows.empty());
  for (const dts::Record& r : rows) {
    EXPECT_EQ(r.labels.device.rfind("cpu", 0), 0u) << r.labels.device;
    EXPECT_NE(r.verdict, dts::Verdict::skip) << r.case_id << ": " << r.detail;
  }
}

// The nccl backend on a machine without a GPU: one line at set-up, exit 2, no CSV row claiming a
// result. With a GPU this is not the case to test (the nccl conformance cases run there).
TEST(DeviceMemory, NcclWithoutAGpuStopsAtSetUpWithOneLine) {
#if !DTS_HAVE_NCCL
  GTEST_SKIP() << "this build has no nccl backend";
#else
  if (dts::cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is visible";
  const fs::path csv = scratch_dir() / "nccl_no_gpu.csv";
  const RunResult r = run_dtsuite(2, "run collectives --backend nccl --quick --csv " + csv.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("dtsuite: error: nccl: no CUDA device visible to this rank"), std::string::npos) << r.err;
  size_t lines = 0;
  for (size_t at = r.err.find("dtsuite:"); at != std::string::npos; at = r.err.find("dtsuite:", at + 1)) ++lines;
  EXPECT_EQ(lines, 1u) << r.err;  // rank 0 speaks for both
  EXPECT_FALSE(fs::exists(csv));
#endif
}

}  // namespace

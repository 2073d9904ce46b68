// End-to-end tests of `dtsuite run collectives` and its three input sets: u32 and u64 pass every
// collective on mpi and ring(mpi) at 1-4 ranks with exact, random and overflow inputs; a stack
// that saturates (faulty(saturate,mpi)) or drops NaN in min/max (faulty(dropnan,mpi)) FAILs with
// a detail naming what it did, where the exact and random inputs alone see nothing; fp8 cases
// SKIP on mpi with its own reason and pass on ring(mpi), where a flipped bit and saturation fail.
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

// expected_exit -1: 0 or 1, whichever the run's checks give.
std::vector<dts::Record> run_collectives(int ranks, const std::string& args, int expected_exit, const std::string& name) {
  const fs::path csv = scratch_dir() / (name + ".csv");
  const RunResult r = run_dtsuite(ranks, "run collectives " + args + " --csv " + csv.string());
  if (expected_exit >= 0) EXPECT_EQ(r.exit_code, expected_exit) << r.err << r.out.substr(0, 4000);
  else EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.err << r.out.substr(0, 4000);
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

// fp8 on mpi: MPI has no 8-bit float, so every case SKIPs with the backend's own reason.
TEST(Fp8, MpiSkipsNamingItself) {
  const auto rows = run_collectives(2, "--backend mpi -d f8e4m3,f8e5m2 --collective all_reduce,broadcast " + kSweep, 0,
                                    "fp8_mpi");
  ASSERT_FALSE(rows.empty());
  for (const dts::Record& r : rows) {
    EXPECT_EQ(r.verdict, dts::Verdict::skip) << r.case_id;
    EXPECT_NE(r.detail.find("backend mpi has no " + r.labels.dtype), std::string::npos) << r.case_id << ": " << r.detail;
  }
}

// ring(mpi) reduces fp8 with dtsuite's own arithmetic and sends it as bytes: its collectives
// (all_reduce, reduce_scatter, all_gather) pass every input set, every op, in and out of place,
// counts 0, 1 and odd, at 1-4 ranks. What it forwards to mpi (broadcast, ...) SKIPs naming mpi.
class Fp8Ring : public testing::TestWithParam<int> {};

TEST_P(Fp8Ring, PassesEveryInputSetOfItsCollectives) {
  const int np = GetParam();
  const auto rows = run_collectives(np, "--backend 'ring(mpi)' -d f8e4m3,f8e5m2 --collective "
                                        "all_reduce,reduce_scatter,all_gather,broadcast " + kSweep,
                                    0, "fp8_ring_" + std::to_string(np));
  std::set<std::string> passed;  // collective/dtype/redop
  std::set<std::string> placements;
  for (const dts::Record& r : rows) {
    if (r.labels.op == "broadcast") {
      EXPECT_EQ(r.verdict, dts::Verdict::skip) << r.case_id;
      EXPECT_NE(r.detail.find("backend mpi has no " + r.labels.dtype), std::string::npos) << r.detail;
      continue;
    }
    if (r.metric != "wrong") continue;
    EXPECT_EQ(r.verdict, dts::Verdict::pass) << r.case_id << ": " << r.detail;
    for (const char* set : {"exact inputs: 0 wrong", "random inputs: 0 wrong", "overflow inputs: 0 wrong"}) {
      EXPECT_NE(r.detail.find(set), std::string::npos) << r.case_id << ": " << r.detail;
    }
    passed.insert(r.labels.op + "/" + r.labels.dtype + "/" + *dts::config_value(r.labels.config, "redop"));
    placements.insert(r.labels.placement);
  }
  // 2 dtypes x (all_reduce and reduce_scatter with 5 ops, all_gather with none).
  EXPECT_EQ(passed.size(), 2u * (5 + 5 + 1));
  EXPECT_EQ(placements, (std::set<std::string>{"in_place", "out_of_place"}));
}

INSTANTIATE_TEST_SUITE_P(Ranks, Fp8Ring, testing::Values(1, 2, 3, 4));

// A wrong bit in an fp8 result is caught: faulty(bitflip,ring(mpi)) flips the lowest bit of one
// element of the victim's output, and exact inputs see it.
TEST(Fp8, BitflipIsCaught) {
  const auto rows = run_collectives(3, "--backend 'faulty(bitflip,ring(mpi))' -d f8e4m3,f8e5m2 -o sum,max "
                                       "--collective all_reduce,reduce_scatter,all_gather " + kSweep,
                                    1, "fp8_bitflip");
  std::set<std::string> caught;
  for (const dts::Record& r : wrong_rows(rows)) {
    if (r.verdict == dts::Verdict::fail) caught.insert(r.labels.dtype);
  }
  EXPECT_EQ(caught, (std::set<std::string>{"f8e4m3", "f8e5m2"}));
}

// A stack that saturates fp8 (NCCL's kernels convert with __NV_SATFINITE) fails the overflow
// inputs, named by the dtype's largest value, where the exact inputs see nothing.
TEST(Fp8, SaturationIsNamed) {
  const auto rows = run_collectives(3, "--backend 'faulty(saturate,ring(mpi))' -d f8e4m3,f8e5m2 -o sum,prod "
                                       "--collective all_reduce " + kSweep,
                                    1, "fp8_saturate");
  std::set<std::string> named;
  for (const dts::Record& r : wrong_rows(rows)) {
    if (r.verdict != dts::Verdict::fail) continue;
    EXPECT_NE(r.detail.find("exact inputs: 0 wrong"), std::string::npos) << r.detail;
    // 448 = 1.75 * 2^8 (e4m3), 57344 = 1.75 * 2^15 (e5m2): the largest finite values.
    const std::string bound = r.labels.dtype == "f8e4m3" ? "448" : "57344";
    if (overflow_part(r.detail).find("saturates at " + bound) != std::string::npos) named.insert(r.labels.dtype);
  }
  EXPECT_EQ(named, (std::set<std::string>{"f8e4m3", "f8e5m2"}));
}

// -c N isolates an intermittent fault, as nccl-tests' -c does: faulty(bitflip) on rank 2 of 4
// at --fault-rate 0.02 (one call in 50). Each placement of a case makes 3N checked calls; at -c 20
// a bitflip falls on one of them with probability 1 - 0.98^60 = 0.70, at -c 1 with 1 - 0.98^3 =
// 0.06, so many more cases fail at -c 20 (the seed fixes which). Every failed case names rank 2
// and its node as the suspect: only its output is touched.
int failed_naming(const std::vector<dts::Record>& rows, const std::string& suspect, int* others) {
  int named = 0;
  for (const dts::Record& r : wrong_rows(rows)) {
    if (r.verdict != dts::Verdict::fail) continue;
    if (r.detail.find(suspect) != std::string::npos) ++named;
    else ++*others;
  }
  return named;
}

TEST(RepeatedChecks, AnIntermittentBitflipIsNamedByRankAndNode) {
  const std::string args = "--backend 'faulty(bitflip,mpi)' --fault-rank 2 --fault-rate 0.02 --seed 3 -d i32 -o sum "
                           "--collective all_reduce,all_gather,broadcast,all_to_all -b 8 -e 512 -f 8 -n 20 -w 0 ";
  int others = 0;
  const auto many = run_collectives(4, args + "-c 20", 1, "intermittent_c20");
  const int named20 = failed_naming(many, "suspect: rank 2 (node ", &others);
  const auto one = run_collectives(4, args + "-c 1", -1, "intermittent_c1");
  const int named1 = failed_naming(one, "suspect: rank 2 (node ", &others);
  EXPECT_EQ(others, 0) << "a failed case that does not name rank 2";
  EXPECT_GE(named20, 5) << "expected about 0.7 of some 40 cases with elements";
  EXPECT_GT(named20, named1);
  for (const dts::Record& r : wrong_rows(many)) {
    if (r.verdict == dts::Verdict::fail) {
      EXPECT_NE(r.detail.find("20 checked iterations: "), std::string::npos) << r.detail;
      EXPECT_NE(r.detail.find(" of 20 checked iterations)"), std::string::npos) << r.detail;
    }
  }
}

// More checked iterations than timed ones (-c 5, -n 2): the two timed iterations are all timed
// (each time row keeps 2 samples), five checks follow them, and a correct stack passes all five.
TEST(RepeatedChecks, MoreChecksThanTimedIterationsAllRunAndPass) {
  const auto rows = run_collectives(3, "-d u32 --mpi-names fixed -o sum,max -b 8 -e 512 -f 8 -n 2 -w 0 -c 5", 0,
                                    "more_checks");
  int wrong = 0, timed = 0;
  for (const dts::Record& r : rows) {
    if (r.metric == "wrong") {
      ++wrong;
      EXPECT_EQ(r.verdict, dts::Verdict::pass) << r.detail;
      EXPECT_EQ(r.detail.rfind("5 checked iterations: exact inputs: 0 wrong", 0), 0u) << r.detail;
    }
    if (r.metric == "time") {
      ++timed;
      EXPECT_EQ(r.stats.n, 2) << r.case_id;
    }
  }
  EXPECT_GT(wrong, 0);
  EXPECT_EQ(timed, wrong);  // one time and one wrong row per case and placement
}

// Whose data was wrong, where the collective says: faulty(drop) makes rank 1 contribute zeros,
// which every rank receives. In all_gather each output block carries one rank's input, so the
// wrong elements name rank 1 as their sender though every rank received some; in all_reduce every
// element holds every rank's input, and no one rank is singled out.
class ContributionNamed : public testing::TestWithParam<int> {};

TEST_P(ContributionNamed, DataMovementNamesTheSenderReductionsDoNot) {
  const int np = GetParam();
  const auto rows = run_collectives(np, "--backend 'faulty(drop,mpi)' --fault-rank 1 -d i32 -o sum "
                                        "--collective all_gather,all_reduce " + kSweep,
                                    1, "contribution_" + std::to_string(np));
  int gathers = 0, reductions = 0;
  for (const dts::Record& r : wrong_rows(rows)) {
    if (r.verdict != dts::Verdict::fail) continue;
    if (r.labels.op == "all_gather") {
      ++gathers;
      EXPECT_NE(r.detail.find("suspect: rank 1 (node "), std::string::npos) << r.detail;
      EXPECT_NE(r.detail.find("whose data arrived wrong at ranks 0 ("), std::string::npos) << r.detail;
    } else {
      ++reductions;
      EXPECT_EQ(r.detail.find("suspect:"), std::string::npos) << r.detail;
      EXPECT_NE(r.detail.find("no one rank singled out: wrong elements received at ranks 0 ("), std::string::npos)
          << r.detail;
    }
  }
  // Cases with at least one element (the sweep's 0-element case has nothing to drop).
  EXPECT_GT(gathers, 0);
  EXPECT_GT(reductions, 0);
}

INSTANTIATE_TEST_SUITE_P(Ranks, ContributionNamed, testing::Values(3, 4));

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

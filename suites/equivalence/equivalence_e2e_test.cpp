// The equivalence suite's verdicts against the faults they exist for, through the dtsuite binary
// under mpirun, on the host and on the device path (the emulated device through staged(...), whose
// memory host code reaches only through copies and the kernel table). The faults come from
// faulty(KIND,INNER) on one rank; each case of a layout with the victim must fail on its check.
// The data faults' matrix for ddp, zero3, tp, the pipelines and gossip is in harness/dtsuite_e2e_test.cpp;
// this file adds the checks and strategies it leaves out.
//   ctest -R equivalence_e2e_test
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "harness/testing/e2e.h"
#include "results/csv_reader.h"

namespace {

namespace fs = std::filesystem;
using namespace dts::e2e;

// A small model (3 layers allow pp up to 3) and 3 steps: each case runs in well under a second.
const std::string kSmallTraining = "--steps 3 --batch 23 --layers 3 --width 13 --input 7 --classes 5";
const std::string kDevice = "--device emulated --backend ";

std::vector<dts::Record> run_equivalence(int np, const std::string& args, int expected_exit, const std::string& name) {
  const fs::path csv = scratch_dir() / (name + ".csv");
  const RunResult r = run_dtsuite(np, "run equivalence " + args + " " + kSmallTraining + " --csv " + csv.string());
  EXPECT_EQ(r.exit_code, expected_exit) << r.err << r.out.substr(0, 2000);
  return dts::read_results_csv(csv.string());
}

// Per case id of the layouts of `world` ranks: the metrics whose verdict failed.
std::map<std::string, std::set<std::string>> failures_at(const std::vector<dts::Record>& records, int world) {
  std::map<std::string, std::set<std::string>> failed;
  for (const dts::Record& r : records) {
    if (r.labels.world_size != world) continue;
    auto& metrics = failed[r.case_id];
    if (r.verdict == dts::Verdict::fail) metrics.insert(r.metric);
  }
  return failed;
}

// --- reproducible: a stack that gives other bits the second time -------------------------------
//
// The suite trains every case twice with the same config and compares the bits. A stack whose
// result changes from one run to the next (a reduction with atomics, a race on a buffer, a
// corruption that strikes only sometimes) must fail `reproducible`, even where each run alone
// would pass. The fault: faulty(drop) armed after the first run's collectives, so that the
// second run alone loses the victim's gradients. ddp on 3 ranks with this model is one bucket:
// per step one gradient all_reduce and the loss's, 6 collectives in the first run's 3 steps (the
// replica digests are taken after the first run, the reference compared with it: only
// `reproducible` can see the second). The victim is the last rank, so only the 3-rank layout has
// the fault. (A flipped low bit of a gradient would not do: its ulp times the learning rate is
// far below a parameter's ulp, and the parameters, all that a second run is compared on, absorb it.)
constexpr int kFirstRunCollectives = 2 * 3;

void expect_only_reproducible_fails(const std::vector<dts::Record>& records) {
  const auto at3 = failures_at(records, 3);
  ASSERT_EQ(at3.size(), 1u);  // ddp dp3, f32, sgd
  EXPECT_EQ(at3.begin()->second, (std::set<std::string>{"reproducible"})) << at3.begin()->first;
  for (const auto& [id, metrics] : failures_at(records, 2)) EXPECT_TRUE(metrics.empty()) << id;
  for (const auto& [id, metrics] : failures_at(records, 1)) EXPECT_TRUE(metrics.empty()) << id;
}

TEST(Reproducible, ASecondRunWithOtherBitsFailsOnTheHost) {
  const auto records = run_equivalence(3, "--strategy ddp -d f32 --optimizer sgd --backend 'faulty(drop,mpi)' "
                                          "--fault-after " + std::to_string(kFirstRunCollectives), 1, "repro_host");
  expect_only_reproducible_fails(records);
}

TEST(Reproducible, ASecondRunWithOtherBitsFailsOnTheDevice) {
  const auto records = run_equivalence(3, kDevice + "'staged(faulty(drop,mpi))' --strategy ddp -d f32 "
                                          "--optimizer sgd --fault-after " + std::to_string(kFirstRunCollectives), 1,
                                       "repro_device");
  expect_only_reproducible_fails(records);
  for (const dts::Record& r : records) EXPECT_EQ(r.labels.device, "emulated") << r.case_id;
}

// The control: the same flags without the fault arm nothing, and every case passes both runs.
TEST(Reproducible, TheSameRunsOnASoundStackPass) {
  const auto records = run_equivalence(3, kDevice + "'staged(mpi)' --strategy ddp -d f32 --optimizer sgd", 0,
                                       "repro_sound");
  int passed = 0;
  for (const dts::Record& r : records) passed += r.metric == "reproducible" && r.verdict == dts::Verdict::pass;
  EXPECT_EQ(passed, 3);  // dp1, dp2, dp3
}

// --- replay_audit of the parameter servers, on the device -------------------------------------
//
// Server 0 (rank 0, --fault-rank 0) is the victim: bitflip corrupts what it receives (a header or
// a gradient), stale hands it an earlier push again, drop zeroes what it sends (the parameters its
// workers compute on). The servers' log then no longer replays to their parameters bit for bit on
// rank 0's device memory: every case of every layout with a worker of that server fails its
// audit, in sync and async modes alike (ps_mpi_test shows the same on host memory).
class DeviceServerFaults : public testing::TestWithParam<std::string> {};

TEST_P(DeviceServerFaults, FailTheReplayAudit) {
  const std::string kind = GetParam();
  const auto records = run_equivalence(3, kDevice + "'staged(faulty(" + kind + ",mpi))' --fault-rank 0 "
                                          "--strategy 'ps-sync(servers=1),ps-async(servers=1)' -d f32,bf16 "
                                          "--optimizer sgd", 1, "ps_" + kind);
  std::set<std::string> cases, caught;
  for (const dts::Record& r : records) {
    EXPECT_EQ(r.labels.device, "emulated") << r.case_id;
    if (r.labels.world_size < 2) continue;
    cases.insert(r.case_id);
    if (r.metric == "replay_audit" && r.verdict == dts::Verdict::fail) caught.insert(r.case_id);
  }
  // 2 modes x 2 precisions x layouts s1-w1 (2 ranks) and s1-w2 (3 ranks).
  EXPECT_EQ(cases.size(), 8u);
  EXPECT_EQ(caught, cases) << kind;
}

INSTANTIATE_TEST_SUITE_P(Kinds, DeviceServerFaults, testing::Values("bitflip", "stale", "drop"));

// --- hybrid, zero1 and zero2 on the device ------------------------------------------------------
//
// A dropped contribution on rank 1 (a member of every layout of 2 or more ranks) moves the
// gradients far past the bound (max_abs_error); a flipped low bit hides under the bound but
// splits the dp replicas (check). hybrid at 4 ranks: the layouts with dp 2 (dp2-tp1-pp2 and
// dp2-tp2-pp1, each with and without ZeRO-1), whose replicas rank 1 is one of; zero1 and zero2 at
// dp 2, 3 and 4.
struct DeviceFault {
  std::string kind, metric;
};

class DeviceShardedFaults : public testing::TestWithParam<DeviceFault> {};

TEST_P(DeviceShardedFaults, AreCaught) {
  const DeviceFault& f = GetParam();
  const auto records = run_equivalence(4, kDevice + "'staged(faulty(" + f.kind + ",mpi))' --fault-rank 1 "
                                          "--strategy hybrid,zero1,zero2 -d f32 --optimizer sgd,adamw", 1,
                                       "sharded_" + f.kind);
  std::set<std::string> want, caught;
  for (const dts::Record& r : records) {
    const std::string& c = r.labels.config;
    const bool dp_above_one = c.find("dp=1;") == std::string::npos;
    if (!dp_above_one || r.labels.world_size < 2) continue;
    want.insert(r.case_id);
    if (r.metric == f.metric && r.verdict == dts::Verdict::fail) caught.insert(r.case_id);
  }
  // hybrid: 4 layouts with dp 2; zero1 and zero2: dp 2, 3, 4; each with sgd and adamw.
  EXPECT_EQ(want.size(), (4u + 2 * 3) * 2);
  EXPECT_EQ(caught, want) << f.kind;
}

INSTANTIATE_TEST_SUITE_P(Kinds, DeviceShardedFaults,
                         testing::Values(DeviceFault{"drop", "max_abs_error"}, DeviceFault{"bitflip", "check"}),
                         [](const testing::TestParamInfo<DeviceFault>& param) { return param.param.kind; });

}  // namespace

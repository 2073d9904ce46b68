// End-to-end tests of the model-parallel strategies in the dtsuite binary: tp, gpipe, 1f1b and
// hybrid through `run equivalence` under mpirun at 4 ranks, read back with results' CSV reader.
// Every layout passes on a sound stack and records who took part; faults injected into the
// collectives and into point-to-point traffic fail them; a bad strategy is a usage error.
//   ctest -R training_e2e_test
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "core/buffer.h"
#include "dts/config.h"
#include "harness/testing/e2e.h"
#include "results/csv_reader.h"

namespace {

namespace fs = std::filesystem;
using namespace dts::e2e;

// A small model and few steps: the whole matrix runs in seconds. 3 layers allow pp up to 3;
// width 13 splits unevenly over every tp of 2..4 (layer 0 is column-parallel over its 13
// outputs, layer 1 row-parallel over its 13 inputs, layer 2 replicated).
const std::string kSmallTraining = "--steps 3 --batch 23 --layers 3 --width 13 --input 7 --classes 5";

std::vector<dts::Record> run_equivalence(const std::string& args, int expected_exit, const std::string& name,
                                         int ranks = 4) {
  const fs::path csv = scratch_dir() / (name + ".csv");
  const RunResult r = run_dtsuite(ranks, "run equivalence " + args + " " + kSmallTraining + " --csv " + csv.string());
  EXPECT_EQ(r.exit_code, expected_exit) << r.err;
  return dts::read_results_csv(csv.string());
}

TEST(ModelParallel, EveryLayoutPassesAndSaysWhoTookPart) {
  const auto records = run_equivalence("--strategy tp,gpipe,1f1b,hybrid --backend 'ring(mpi)'", 0, "layouts");
  std::set<std::string> layouts;
  int bit_exact = 0, traffic_judged = 0;
  for (const dts::Record& r : records) {
    EXPECT_NE(r.verdict, dts::Verdict::fail) << r.case_id << " " << r.metric << " " << r.detail;
    layouts.insert(r.case_id.substr(r.case_id.rfind('/') + 1));
    if (r.metric == "bit_exact") ++bit_exact;
    if (r.metric == "bytes_sent" && r.verdict == dts::Verdict::pass) ++traffic_judged;
    // world_size is the layout's ranks, the job's size is in config.
    const std::string& c = r.labels.config;
    const auto dim = [&](const char* key) { return std::stoi(c.substr(c.find(key) + 3)); };
    EXPECT_EQ(r.labels.world_size, dim("dp=") * dim("tp=") * dim("pp=")) << r.case_id;
    EXPECT_NE(c.find("job=4"), std::string::npos) << c;
  }
  // tp at 1..4 ranks; pipelines at 1..3 stages (3 layers); hybrid on 4 ranks: dp2 x tp2 and
  // dp2 x pp2 (each with and without ZeRO-1), tp2 x pp2.
  const std::set<std::string> want{"tp1",
                                   "tp2",
                                   "tp3",
                                   "tp4",
                                   "pp1-mb4",
                                   "pp2-mb4",
                                   "pp3-mb4",
                                   "dp1-tp2-pp2-mb4",
                                   "dp2-tp1-pp2-mb4",
                                   "dp2-tp1-pp2-zero1-mb4",
                                   "dp2-tp2-pp1-mb4",
                                   "dp2-tp2-pp1-zero1-mb4"};
  EXPECT_EQ(layouts, want);
  // Layouts that sum nothing in another order: gpipe and 1f1b at pp 1..3 and tp at 1 rank, each
  // in 3 precisions x 2 optimizers.
  EXPECT_EQ(bit_exact, 7 * 6);
  // Over ring(mpi) every case's traffic is measured: (4 + 3 + 3 + 5) layouts x 6.
  EXPECT_EQ(traffic_judged, 15 * 6);
}

// Cases of a layout whose verdict on `metric` failed, by precision and optimizer.
std::set<std::string> failed(const std::vector<dts::Record>& records, const std::string& layout,
                             const std::string& metric) {
  std::set<std::string> cases;
  for (const dts::Record& r : records) {
    const bool match = r.case_id.size() > layout.size() &&
                       r.case_id.compare(r.case_id.size() - layout.size(), layout.size(), layout) == 0;
    if (match && r.metric == metric && r.verdict == dts::Verdict::fail) cases.insert(r.case_id);
  }
  return cases;
}

// Rank 1 of the job is the victim: a member of every layout of 2 ranks or more.
const std::string kVictim = " --fault-rank 1";

TEST(ModelParallel, ADroppedContributionFailsEveryStrategy) {
  // The victim contributes zeros to reductions and sends zeros: gradients are far off, in every
  // precision.
  const auto records =
      run_equivalence("--strategy tp,gpipe,1f1b,hybrid --backend 'faulty(drop,mpi)'" + kVictim, 1, "drop");
  for (const char* layout : {"/tp4", "/pp3-mb4", "/dp2-tp2-pp1-mb4", "/dp2-tp1-pp2-mb4", "/dp1-tp2-pp2-mb4"}) {
    const size_t strategies = std::string(layout).find("pp3") != std::string::npos ? 2 : 1;  // gpipe and 1f1b
    EXPECT_EQ(failed(records, layout, "max_abs_error").size(), strategies * 6) << layout;
  }
}

TEST(ModelParallel, AFlippedBitFailsEveryStrategy) {
  // One flipped low bit per call on rank 1: invisible to the error bound, caught where state must
  // be alike or nothing may differ. tp: every tp all_reduce result is digested across the group.
  // Pipelines: bit_exact (parameters and losses; in bf16 compute activations travel as bf16, so the
  // flipped bit is a bf16 bit and survives). Hybrid with dp 2: the dp replicas' digests. Not
  // required: dp1-tp2-pp2, where rank 1 is stage 0's second tp rank, whose layer has no tp
  // all_reduce; a flipped gradient it receives moves only its own shard, which has no replica and
  // no same-order reference, by far less than the bound.
  for (const std::string backend : {"faulty(bitflip,mpi)", "ring(faulty(bitflip,mpi))"}) {
    const auto records = run_equivalence("--strategy tp,gpipe,1f1b,hybrid --backend '" + backend + "'" + kVictim, 1,
                                         backend == "faulty(bitflip,mpi)" ? "bitflip" : "ring_bitflip");
    for (const char* layout : {"/tp2", "/tp3", "/tp4"}) {
      EXPECT_EQ(failed(records, layout, "check").size(), 6u) << backend << layout;  // 3 precisions x 2 optimizers
    }
    // pp3: rank 1 is the middle stage and receives activations and gradients: every case of gpipe
    // and 1f1b. pp2: rank 1 is the last stage and receives activations only; a flipped last bit
    // of an f32 or f64 activation can vanish in the roundings of the logits (seen: f64 sgd), but
    // a flipped bf16 bit is 2^-8 of the value and always shows.
    EXPECT_EQ(failed(records, "/pp3-mb4", "bit_exact").size(), 12u) << backend;
    int bf16_caught = 0;
    for (const auto& id : failed(records, "/pp2-mb4", "bit_exact")) bf16_caught += id.find("/bf16/") != std::string::npos;
    EXPECT_EQ(bf16_caught, 4) << backend;  // gpipe and 1f1b x 2 optimizers
    for (const char* layout : {"/dp2-tp1-pp2-mb4", "/dp2-tp1-pp2-zero1-mb4", "/dp2-tp2-pp1-mb4", "/dp2-tp2-pp1-zero1-mb4"}) {
      EXPECT_EQ(failed(records, layout, "check").size(), 6u) << backend << layout;
    }
  }
}

TEST(ModelParallel, ReplicatedTensorsStayAlikeAcrossUnevenShards) {
  // dp 3 x tp 2 with a width that splits unevenly: the tp ranks' shards differ in size, and a ring
  // over dp cuts a buffer at other places on each tp rank. The tensors replicated across tp are
  // summed as a block of their own, so they stay bit-identical (check passes) on a sound stack.
  const auto records = run_equivalence("--strategy 'hybrid(dp=3,tp=2)' --backend 'ring(mpi)' --microbatches 2", 0,
                                       "uneven", 6);
  int checks = 0;
  for (const dts::Record& r : records) {
    EXPECT_NE(r.verdict, dts::Verdict::fail) << r.case_id << " " << r.metric << " " << r.detail;
    checks += r.metric == "check" && r.verdict == dts::Verdict::pass;
  }
  EXPECT_EQ(checks, 2 * 3 * 2);  // with and without ZeRO-1, 3 precisions, 2 optimizers
}

TEST(ModelParallel, BadStrategiesAreUsageErrors) {
  // A layout whose micro-batches would get no row is refused at set-up too, on every rank.
  const RunResult no_rows = run_dtsuite(2, "run equivalence --strategy gpipe --microbatches 24 " + kSmallTraining +
                                               " --csv " + (scratch_dir() / "rows.csv").string());
  EXPECT_EQ(no_rows.exit_code, 2) << no_rows.err;
  EXPECT_EQ(our_lines(no_rows.err).size(), 1u) << no_rows.err;
  for (const std::string bad : {"bogus", "tp(pp=2)", "hybrid(dp=0)", "ddp,hybrid(dp=2", "gpipe(pp=5)", "tp()"}) {
    const RunResult r = run_dtsuite(2, "run equivalence --strategy '" + bad + "' " + kSmallTraining + " --csv " +
                                           (scratch_dir() / "bad.csv").string());
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_EQ(our_lines(r.err).size(), 1u) << bad << ": " << r.err;
  }
}

// --straggler: a bad value is one line, exit 2; a strategy that cannot slow its compute SKIPs
// with the reason instead of running unslowed under the straggler's name; the layouts that have
// the straggler's rank say so in their config, the others do not.
TEST(Straggler, BadValuesAreUsageErrorsAndTheConfigNamesIt) {
  for (const std::string bad : {"1", "a:2", "-1:2", "1:0.5", "1:nan", "1:2x", "1:1001", ":2"}) {
    const RunResult r = run_dtsuite(0, "run equivalence --strategy ddp --straggler '" + bad + "' " + kSmallTraining +
                                           " --csv " + (scratch_dir() / "straggler_bad.csv").string());
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_EQ(our_lines(r.err).size(), 1u) << bad << ": " << r.err;
  }
  const auto records = run_equivalence("--strategy ddp,tp --optimizer sgd --straggler 1:3", 0, "straggler", 2);
  int slowed = 0, unslowed = 0, skipped = 0;
  for (const dts::Record& r : records) {
    EXPECT_NE(r.verdict, dts::Verdict::fail) << r.case_id << " " << r.metric << " " << r.detail;
    if (r.labels.strategy == "tp") {
      if (r.labels.config.find("straggler=1:3") != std::string::npos) {
        // tp at 2 ranks has the straggler: it must skip, naming why.
        EXPECT_EQ(r.verdict, dts::Verdict::skip) << r.case_id << " " << r.detail;
        EXPECT_NE(r.detail.find("does not slow its compute for --straggler"), std::string::npos) << r.detail;
        ++skipped;
      }
      continue;
    }
    if (r.metric != "compute_time") continue;
    const bool has = r.labels.config.find(";straggler=1:3") != std::string::npos;
    EXPECT_EQ(has, r.case_id.find("dp2") != std::string::npos) << r.case_id << " " << r.labels.config;
    (has ? slowed : unslowed) += 1;
  }
  EXPECT_EQ(slowed, 3);    // ddp dp2 in f32, f64, bf16
  EXPECT_EQ(unslowed, 3);  // ddp dp1: no rank 1, no straggler
  EXPECT_EQ(skipped, 3);   // tp tp2, one check row per precision
}

// Load per rank (rank_load: the busiest rank's bytes sent + received per step), measured at the
// stack's point-to-point calls over plain mpi: one server's load is W times its load with one
// worker (it receives and answers every worker's gradient of its range: W x (range + header) in,
// W x (range + 8) out), while a gossip rank exchanges with its two ring neighbours whatever N,
// so its load at 4 ranks equals its load at 3. Every bytes_received row passes its theory.
TEST(RankLoad, AServerGrowsWithItsWorkersAndGossipDoesNot) {
  const auto records = run_equivalence("--strategy 'ps-sync(servers=1),gossip' -d f32 --optimizer sgd", 0, "load", 4);
  std::map<std::string, double> load;  // case id -> rank_load
  int received = 0;
  for (const dts::Record& r : records) {
    EXPECT_NE(r.verdict, dts::Verdict::fail) << r.case_id << " " << r.metric << " " << r.detail;
    if (r.metric == "rank_load") load[r.case_id] = r.value;
    if (r.metric == "bytes_received") {
      EXPECT_EQ(r.verdict, dts::Verdict::pass) << r.case_id << " " << r.detail;
      ++received;
    }
  }
  EXPECT_EQ(received, 3 + 4);  // ps-sync s1-w1..w3, gossip dp1..4
  const double one = load["ps-sync/f32/sgd/s1-w1"];
  ASSERT_GT(one, 0);
  EXPECT_EQ(load["ps-sync/f32/sgd/s1-w2"], 2 * one);
  EXPECT_EQ(load["ps-sync/f32/sgd/s1-w3"], 3 * one);
  ASSERT_GT(load["gossip/f32/sgd/dp3"], 0);
  EXPECT_EQ(load["gossip/f32/sgd/dp4"], load["gossip/f32/sgd/dp3"]);
}

// Every strategy on a GPU: --backend nccl (one GPU per rank, up to 4) and staged(mpi) (1-4 ranks
// sharing GPU 0) keep every tensor in GPU memory and must match the CPU reference within its bound
// widened by the device's reordered sums (tolerance.h, device_kernel_terms), in f32 and bf16;
// f64 SKIPs saying why; the parameter servers and gossip pass their replay audits (cuBLAS giving
// the same bits to the same call). Without a GPU both SKIP; a GPU runner runs them with
// `ctest -R training_e2e_test`.
//
// The f32 and bf16 cases of a device run: none failed, nothing SKIPped but f64 (saying why);
// returns the strategies that passed their check.
std::set<std::string> device_strategies_passed(const std::vector<dts::Record>& records) {
  std::set<std::string> passed;
  for (const dts::Record& r : records) {
    EXPECT_NE(r.verdict, dts::Verdict::fail) << r.case_id << " " << r.metric << " " << r.detail;
    if (r.labels.dtype == "f64") {
      if (r.verdict == dts::Verdict::skip) {
        EXPECT_NE(r.detail.find("on the device computes in f32 and bf16"), std::string::npos) << r.detail;
      }
      continue;
    }
    EXPECT_NE(r.verdict, dts::Verdict::skip) << r.case_id << " " << r.metric << " " << r.detail;
    if (r.metric == "check" && r.verdict == dts::Verdict::pass) passed.insert(r.labels.strategy);
  }
  return passed;
}

// The strategies with a layout on `ranks` ranks (the parameter servers need 2, ps-backup 3,
// hybrid 4).
std::set<std::string> strategies_on(int ranks) {
  std::set<std::string> names{"ddp", "zero1", "zero2", "zero3", "tp", "gpipe", "1f1b", "gossip"};
  if (ranks >= 2) names.insert({"ps-sync", "ps-async", "ps-ssp"});
  if (ranks >= 3) names.insert("ps-backup");
  if (ranks >= 4) names.insert("hybrid");
  return names;
}

TEST(OnTheDevice, EveryStrategyOverNcclMatchesTheCpuReference) {
#if !DTS_HAVE_NCCL
  GTEST_SKIP() << "this build has no nccl backend";
#else
  const int gpus = dts::cuda_device_count();
  if (gpus == 0) GTEST_SKIP() << "no CUDA device";
  const int ranks = std::min(gpus, 4);
  // With accumulation too, so micro-batches are summed on the device.
  for (const std::string accumulation : {"1", "3"}) {
    const auto records = run_equivalence("--backend nccl --accumulation " + accumulation, 0, "nccl" + accumulation, ranks);
    EXPECT_EQ(device_strategies_passed(records), strategies_on(ranks)) << "accumulation " << accumulation;
  }
#endif
}

TEST(OnTheDevice, EveryStrategyOverStagedMpiSharesOneGpu) {
  if (dts::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  for (int ranks = 1; ranks <= 4; ++ranks) {
    const std::string env = "CUDA_VISIBLE_DEVICES=0 ";  // every rank on the same GPU
    const fs::path csv = scratch_dir() / ("staged" + std::to_string(ranks) + ".csv");
    const RunResult r = run_shell(env + std::string(DTS_MPIEXEC) + " -np " + std::to_string(ranks) + " " +
                                  DTS_MPIEXEC_FLAGS + " " + DTS_BINARY + " run equivalence --device cuda --backend "
                                  "'staged(mpi)' " + kSmallTraining + " --csv " + csv.string());
    ASSERT_EQ(r.exit_code, 0) << ranks << " ranks: " << r.err;
    EXPECT_EQ(device_strategies_passed(dts::read_results_csv(csv.string())), strategies_on(ranks)) << ranks;
  }
}

}  // namespace

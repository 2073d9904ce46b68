// Parameter servers under mpirun (NP 2 3 4), every split of the ranks into S servers and W workers:
// ps-sync against the single-process reference (within the summation-order bound; bit for bit
// with one worker), replicas alike; the replay audit of every mode passes on a clean stack and
// fails when the stack corrupts, duplicates or loses what travels (the faulty backend on a server),
// when a server logs another order than it applied, and ps-ssp's bound holds until a planted
// server ignores it; ps-backup drops exactly b gradients per update.
//   ctest -R ps_mpi_test   (or mpirun -np 3 build/strategies/ps_mpi_test)
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "comm/communicator.h"
#include "strategies/ps/ps_strategy.h"
#include "strategies/strategy_spec.h"
#include "strategies/testing.h"

namespace dts {
namespace {

using strategy_testing::max_abs_difference;

const ModelSpec kSpec{3, 12, 7, 5, 41, 42};  // 7 -> 12 -> 12 -> 5
constexpr int64_t kGlobalRows = 23;          // prime: uneven over 2 and 3 workers
constexpr int kSteps = 4;

int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

ParallelConfig layout(int servers, OptimizerKind optimizer = OptimizerKind::sgd, int staleness = 0, int backup = 0) {
  ParallelConfig config;
  config.servers = servers;
  config.dp = world_size() - servers;
  config.staleness = staleness;
  config.backup = backup;
  config.train = strategy_testing::test_train_config(optimizer);
  return config;
}

struct PsRun {
  std::vector<double> params;
  std::vector<StepReport> reports;
  std::vector<ReplicaDigest> digests;
  ReplayAudit audit;
  std::vector<std::vector<double>> paused;  // full_parameters() read between steps
};

// `slow_rank` sleeps before each of its steps: a straggler, so that asynchrony really happens.
template <class T = double>
PsRun run(PsMode mode, const ParallelConfig& config, const std::string& backend = "mpi", CommOptions options = {},
        int slow_rank = -1, bool ignore_bound = false, bool swap_updates = false, int pause_every = 0) {
  auto comm = make_communicator(backend, options);
  PsStrategy<T> ps(kSpec, config, *comm, mode, sizeof(T) == 8 ? Precision::f64 : Precision::f32);
  ps.plant_fault_for_test(ignore_bound, swap_updates);
  PsRun r;
  for (int s = 0; s < kSteps; ++s) {
    if (comm->rank() == slow_rank) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    r.reports.push_back(ps.step(make_batch(kSpec, s * kGlobalRows, kGlobalRows)));
    if (pause_every > 0 && (s + 1) % pause_every == 0 && s + 1 < kSteps) r.paused.push_back(ps.full_parameters());
  }
  r.digests = ps.replica_digests();
  r.audit = *ps.audit();
  r.params = ps.full_parameters();
  return r;
}

// Every rank's digest of a key equals the first rank's that reported it.
void expect_digests_agree(const std::vector<ReplicaDigest>& mine) {
  const int n = world_size();
  for (int j = 0; j < n; ++j) {
    const std::string key = "ps.range" + std::to_string(j);
    uint64_t value = 0;
    int have = 0;
    for (const ReplicaDigest& d : mine) {
      if (d.key == key) value = d.digest, have = 1;
    }
    // Gather (have, value) from every rank; every rank that has the key must agree.
    std::vector<uint64_t> values(static_cast<size_t>(n));
    std::vector<int> haves(static_cast<size_t>(n));
    MPI_Allgather(&value, 1, MPI_UINT64_T, values.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
    MPI_Allgather(&have, 1, MPI_INT, haves.data(), 1, MPI_INT, MPI_COMM_WORLD);
    int holders = 0;
    uint64_t first = 0;
    for (int r = 0; r < n; ++r) {
      if (!haves[static_cast<size_t>(r)]) continue;
      if (holders++ == 0) first = values[static_cast<size_t>(r)];
      EXPECT_EQ(values[static_cast<size_t>(r)], first) << key << " on rank " << r;
    }
  }
}

TEST(PsSync, MatchesTheSingleProcessReferenceForEverySplit) {
  for (OptimizerKind optimizer : {OptimizerKind::sgd, OptimizerKind::adamw}) {
    for (int servers = 1; servers < world_size(); ++servers) {
      SCOPED_TRACE("servers " + std::to_string(servers));
      const ParallelConfig config = layout(servers, optimizer);
      const std::vector<double> want = strategy_testing::run_single(kSpec, config.train, kSteps, kGlobalRows);
      const PsRun got = run(PsMode::sync, config);
      // As for ddp (ddp_mpi_test.cpp): the gradient differs from the reference only in the
      // order of its sum over workers, ~1e-15 relative; 1e-12 leaves a margin of 1000 and a lost
      // worker (its rows' share, ~1e-3 of a parameter) still shows.
      EXPECT_LT(max_abs_difference(got.params, want), 1e-12);
      expect_digests_agree(got.digests);
      if (world_rank() == 0) {
        EXPECT_TRUE(got.audit.ran);
        EXPECT_EQ(got.audit.problem, "");
        EXPECT_EQ(got.audit.updates, kSteps);
        EXPECT_EQ(got.audit.applied, kSteps * config.dp);
        EXPECT_EQ(got.audit.mismatched, 0);
      }
    }
  }
}

TEST(PsSync, OneWorkerIsOneProcessBitForBit) {
  // S = N - 1 servers and one worker: nothing is summed in another order than one process.
  for (PsMode mode : {PsMode::sync, PsMode::async}) {
    const ParallelConfig config = layout(world_size() - 1, OptimizerKind::adamw);
    const std::vector<double> want = same_order_run(kSpec, config.train, Precision::f32, kSteps, kGlobalRows, 1);
    const PsRun got = run<float>(mode, config);
    for (size_t i = 0; i < got.params.size(); ++i) {
      ASSERT_EQ(std::memcmp(&got.params[i], &want[i], sizeof(double)), 0) << "parameter " << i;
    }
    if (world_rank() == 0) {  // server 0 reports its worker's loss, as one process does
      for (int s = 0; s < kSteps; ++s) {
        EXPECT_EQ(got.reports[static_cast<size_t>(s)].loss, want[got.params.size() + static_cast<size_t>(s)]);
      }
    }
  }
}

TEST(PsAudit, EveryModeReplaysToTheServersParameters) {
  const int n = world_size();
  for (int servers = 1; servers < n; ++servers) {
    const int workers = n - servers;
    struct Mode {
      PsMode mode;
      int staleness, backup;
    };
    std::vector<Mode> modes{{PsMode::sync, 0, 0}, {PsMode::async, 0, 0}, {PsMode::ssp, 0, 0}, {PsMode::ssp, 1, 0}};
    if (workers >= 2) modes.push_back({PsMode::backup, 0, 1});
    for (const Mode& m : modes) {
      SCOPED_TRACE(std::string(name(m.mode)) + " servers " + std::to_string(servers) + " staleness " +
                   std::to_string(m.staleness));
      const ParallelConfig config = layout(servers, OptimizerKind::adamw, m.staleness, m.backup);
      const PsRun got = run(m.mode, config, "mpi", {}, n - 1);  // the last worker straggles
      if (world_rank() != 0) continue;
      ASSERT_TRUE(got.audit.ran);
      EXPECT_EQ(got.audit.problem, "");
      EXPECT_EQ(got.audit.mismatched, 0);
      const bool per_gradient = m.mode == PsMode::async || m.mode == PsMode::ssp;
      EXPECT_EQ(got.audit.updates, per_gradient ? kSteps * workers : kSteps);
      EXPECT_EQ(got.audit.applied + got.audit.dropped, kSteps * workers);  // every push used or dropped
      if (m.mode == PsMode::backup) {
        // Every worker computes every step; each update takes the first W - b.
        EXPECT_EQ(got.audit.dropped, kSteps * m.backup);
        for (double d : got.audit.dropped_per_update) EXPECT_EQ(d, m.backup);
      }
      if (m.mode == PsMode::ssp) {
        ASSERT_FALSE(got.audit.lead.empty());
        EXPECT_LE(*std::max_element(got.audit.lead.begin(), got.audit.lead.end()), m.staleness);
      }
      if (m.mode == PsMode::sync || m.mode == PsMode::backup) {
        for (double s : got.audit.staleness) EXPECT_EQ(s, 0);  // rounds use the current version only
      }
    }
  }
}

// Reading the parameters between steps (the convergence suite evaluates every epoch) pauses the
// protocol and resumes it: over tree(mpi), whose broadcast is point to point on the same ranks, a
// receive left posted for a push would take the broadcast's message instead. Sync must give the
// same bits as a run never paused, and the pauses' parameters must be the unpaused run's after
// the same steps; every mode must still replay to what the servers hold.
TEST(PsAudit, ReadingTheParametersBetweenStepsChangesNothing) {
  const int n = world_size();
  if (n < 2) GTEST_SKIP() << "needs a server and a worker";
  for (PsMode mode : {PsMode::sync, PsMode::async, PsMode::ssp, PsMode::backup}) {
    if (mode == PsMode::backup && n - 1 < 2) continue;
    SCOPED_TRACE(std::string(name(mode)));
    const ParallelConfig config = layout(1, OptimizerKind::adamw, 0, mode == PsMode::backup ? 1 : 0);
    const PsRun paused = run(mode, config, "tree(mpi)", {}, -1, false, false, /*pause_every=*/2);
    ASSERT_EQ(paused.paused.size(), static_cast<size_t>((kSteps - 1) / 2));
    if (mode == PsMode::sync) {
      const PsRun straight = run(mode, config, "tree(mpi)");
      EXPECT_EQ(paused.params, straight.params);
      const std::vector<double> after2 = strategy_testing::run_single(kSpec, config.train, 2, kGlobalRows);
      EXPECT_LT(max_abs_difference(paused.paused[0], after2), 1e-12);  // the bound of MatchesTheSingleProcess...
    }
    // Synchronous rounds (sync, backup): after the pauses every worker's copy of each server's
    // range is the server's own, as in an unpaused run.
    if (mode == PsMode::sync || mode == PsMode::backup) expect_digests_agree(paused.digests);
    if (world_rank() != 0) continue;
    ASSERT_TRUE(paused.audit.ran);
    EXPECT_EQ(paused.audit.problem, "");
    EXPECT_EQ(paused.audit.mismatched, 0);
  }
}

TEST(PsAudit, ASspServerThatIgnoresItsBoundIsSeen) {
  const int n = world_size();
  if (n - 1 < 2) GTEST_SKIP() << "needs two workers (a fast one to run ahead of a slow one)";
  const ParallelConfig config = layout(1, OptimizerKind::sgd, 0);
  const PsRun got = run(PsMode::ssp, config, "mpi", {}, n - 1, /*ignore_bound=*/true);
  if (world_rank() != 0) return;
  // The slow worker sleeps 30 ms a step, the fast ones not: unbounded, they run ahead by more
  // than s = 0 steps; the replay still matches (the log is true), the lead check does not.
  EXPECT_EQ(got.audit.problem, "");
  ASSERT_FALSE(got.audit.lead.empty());
  EXPECT_GT(*std::max_element(got.audit.lead.begin(), got.audit.lead.end()), config.staleness);
}

TEST(PsAudit, AServerThatLogsAnotherOrderThanItAppliedFails) {
  const int n = world_size();
  if (n - 1 < 2) GTEST_SKIP() << "needs two workers (two gradients to reorder)";
  const PsRun got = run(PsMode::async, layout(1, OptimizerKind::adamw), "mpi", {}, -1, false, /*swap_updates=*/true);
  if (world_rank() != 0) return;
  EXPECT_NE(got.audit.problem, "");
}

// The faulty backend on server 0 (rank 0): bitflip corrupts what it receives (a header or a
// gradient), stale hands it an earlier push again (a duplicate), drop zeroes what it sends (the
// parameters its workers compute on are lost). Each must fail the audit.
TEST(PsAudit, FaultsOnTheServerFailTheAudit) {
  for (const char* kind : {"bitflip", "stale", "drop"}) {
    for (PsMode mode : {PsMode::sync, PsMode::async}) {
      SCOPED_TRACE(std::string(kind) + " " + std::string(name(mode)));
      CommOptions options;
      options.fault_rank = 0;
      const PsRun got = run(mode, layout(1, OptimizerKind::sgd), std::string("faulty(") + kind + ",mpi)", options);
      if (world_rank() != 0) continue;
      ASSERT_TRUE(got.audit.ran);
      EXPECT_NE(got.audit.problem, "") << "the audit passed a stack that " << kind << "s";
    }
  }
}

TEST(PsLayouts, SpecsParseAndEnumerate) {
  const int n = world_size();
  EXPECT_EQ(layouts_of(parse_strategy_spec("ps-sync"), n, {}).size(), static_cast<size_t>(n - 1));
  EXPECT_EQ(layouts_of(parse_strategy_spec("ps-sync(servers=" + std::to_string(n) + ")"), n, {}).size(), 0u);
  EXPECT_NE(why_no_layout(parse_strategy_spec("ps-sync(servers=" + std::to_string(n) + ")"), n, {}), "");
  const auto ssp = layouts_of(parse_strategy_spec("ps-ssp(servers=1,staleness=0)"), n, {});
  ASSERT_EQ(ssp.size(), 1u);
  EXPECT_EQ(ssp[0].describe(), "dp=" + std::to_string(n - 1) + ";tp=1;pp=1;zero=0;mb=1;schedule=none;servers=1;staleness=0;backup=0");
  EXPECT_EQ(layout_id(parse_strategy_spec("ps-ssp"), ssp[0]), "s1-w" + std::to_string(n - 1) + "-st0");
  EXPECT_THROW(parse_strategy_spec("ps-sync(dp=2)"), Error);
  EXPECT_THROW(parse_strategy_spec("ps-sync(staleness=1)"), Error);
  EXPECT_THROW(parse_strategy_spec("ps-ssp(staleness=-1)"), Error);
  EXPECT_THROW(parse_strategy_spec("ddp(servers=1)"), Error);
  // b >= W: no layout, and why.
  EXPECT_TRUE(layouts_of(parse_strategy_spec("ps-backup(servers=1,backup=" + std::to_string(n - 1) + ")"), n, {}).empty());
}

}  // namespace
}  // namespace dts

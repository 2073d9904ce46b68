// Gossip SGD under mpirun (NP 1 2 3 4): every rank's parameters equal one process replaying all
// ranks, bit for bit; the ranks stay near consensus (their spread far below what training them
// apart gives); one rank is one process; a stack that corrupts what a rank receives fails the audit.
//   ctest -R gossip_mpi_test   (or mpirun -np 3 build/strategies/gossip_mpi_test)
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <string>

#include "comm/communicator.h"
#include "comm/testing/reference.h"
#include "strategies/gossip/gossip_strategy.h"
#include "strategies/testing.h"

namespace dts {
namespace {

using testing::world_rank;

const ModelSpec kSpec{3, 12, 7, 5, 51, 52};  // 7 -> 12 -> 12 -> 5
constexpr int64_t kGlobalRows = 23;          // prime: uneven over 2, 3 and 4 ranks
constexpr int kSteps = 5;

ParallelConfig layout(int n, OptimizerKind optimizer) {
  ParallelConfig config;
  config.dp = n;
  config.train = strategy_testing::test_train_config(optimizer);
  return config;
}

struct GossipRun {
  std::vector<double> average;
  ReplayAudit audit;
};

GossipRun run(OptimizerKind optimizer, const std::string& backend = "mpi", CommOptions options = {}) {
  auto comm = make_communicator(backend, options);
  GossipStrategy<double> gossip(kSpec, layout(comm->size(), optimizer), *comm, Precision::f64);
  for (int s = 0; s < kSteps; ++s) gossip.step(make_batch(kSpec, s * kGlobalRows, kGlobalRows));
  GossipRun r;
  r.audit = *gossip.audit();
  r.average = gossip.full_parameters();
  return r;
}

TEST(Gossip, EveryRankEqualsTheReplayBitForBit) {
  for (OptimizerKind optimizer : {OptimizerKind::sgd, OptimizerKind::adamw}) {
    const GossipRun got = run(optimizer);
    if (world_rank() != 0) continue;
    ASSERT_TRUE(got.audit.ran);
    EXPECT_EQ(got.audit.problem, "");
    EXPECT_EQ(got.audit.mismatched, 0);
    ASSERT_EQ(got.audit.spread.size(), static_cast<size_t>(kSteps));
  }
}

TEST(Gossip, TheRanksStayNearConsensus) {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (n < 2) GTEST_SKIP() << "one rank: nothing to agree on";
  const GossipRun got = run(OptimizerKind::sgd);
  if (world_rank() != 0) return;
  // The same ranks trained apart (no mixing: each rank alone on its rows, replayed as N separate
  // one-rank runs of its own rows) drift by far more than the mixed ones: mixing is what keeps
  // them together. The replay of one rank over its slice is the rank's model without gossip.
  double apart = 0;
  std::vector<std::vector<double>> alone;
  for (int r = 0; r < n; ++r) {
    std::vector<Batch> batches;
    for (int s = 0; s < kSteps; ++s) {
      const Batch batch = make_batch(kSpec, s * kGlobalRows, kGlobalRows);
      const auto [first, rows] = even_split(batch.size, n, r);
      batches.push_back(slice_batch(batch, first, rows));
    }
    alone.push_back(replay_gossip(kSpec, layout(n, OptimizerKind::sgd).train, Precision::f64, 1, batches).parameters);
  }
  for (size_t e = 0; e < alone[0].size(); ++e) {
    double low = alone[0][e], high = alone[0][e];
    for (const auto& a : alone) low = std::min(low, a[e]), high = std::max(high, a[e]);
    apart = std::max(apart, high - low);
  }
  // Measured here (5 steps, SGD): mixed 0.023 against apart 0.097 at 2 ranks, 0.038 / 0.144 at 3,
  // 0.055 / 0.168 at 4 (3.0x to 4.3x); 1.5x still fails a strategy that never mixes (spread equal
  // to apart) with room for other seeds.
  EXPECT_LT(got.audit.spread.back() * 1.5, apart) << "mixed " << got.audit.spread.back() << ", apart " << apart;
}

TEST(Gossip, OneRankIsOneProcessBitForBit) {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (n != 1) GTEST_SKIP() << "the one-rank case";
  const GossipRun got = run(OptimizerKind::adamw);
  const std::vector<double> want =
      same_order_run(kSpec, layout(1, OptimizerKind::adamw).train, Precision::f64, kSteps, kGlobalRows, 1);
  for (size_t i = 0; i < got.average.size(); ++i) {
    ASSERT_EQ(std::memcmp(&got.average[i], &want[i], sizeof(double)), 0) << "parameter " << i;
  }
}

TEST(Gossip, ACorruptedReceiveFailsTheAudit) {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (n < 2) GTEST_SKIP() << "one rank receives nothing";
  for (const char* kind : {"bitflip", "stale", "drop"}) {
    const GossipRun got = run(OptimizerKind::sgd, std::string("faulty(") + kind + ",mpi)");
    if (world_rank() != 0) continue;
    EXPECT_NE(got.audit.problem, "") << kind;
  }
}

}  // namespace
}  // namespace dts

// compare_ab: interleaved A/B rounds judged on their pairs (results/ab.h).
#include "results/ab.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "results/testing/records.h"

namespace dts {
namespace {

// One run's rows: for all_reduce and all_gather at 1 KiB, 64 KiB and 1 MiB, a time (10 us per KiB
// at `scale(op, bytes)`), its algbw and busbw (bytes / time, as the suite derives them), and a
// `wrong` count (no direction).
std::vector<Record> one_run(const std::string& run_id, const std::string& backend,
                            const std::function<double(const std::string&, int64_t)>& scale) {
  std::vector<Record> rows;
  for (const std::string op : {"all_reduce", "all_gather"}) {
    for (const int64_t bytes : {int64_t{1024}, int64_t{65536}, int64_t{1048576}}) {
      Record base;
      base.run_id = run_id;
      base.suite = "collectives";
      base.case_id = op + "/f32/" + std::to_string(bytes);
      base.labels.backend = backend;
      base.labels.device = "cpu";
      base.labels.world_size = 2;
      base.labels.nodes = 1;
      base.labels.ranks_per_node = 2;
      base.labels.op = op;
      base.labels.dtype = "f32";
      base.labels.bytes = bytes;
      base.labels.placement = "out_of_place";
      Record time = base;
      time.metric = "time";
      time.unit = "seconds";
      time.value = 1e-5 * static_cast<double>(bytes) / 1024 * scale(op, bytes);
      rows.push_back(time);
      for (const std::string metric : {"algbw", "busbw"}) {
        Record bw = base;
        bw.metric = metric;
        bw.unit = "bytes_per_second";
        bw.value = static_cast<double>(bytes) / time.value;
        rows.push_back(bw);
      }
      rows.push_back(testing::passing_wrong_row(base));
    }
  }
  return rows;
}

// Rounds whose machine state (`state[r]`, shared by both runs of a round) moves everything by up
// to 2.5x, with independent noise of `noise` (log sd) per row and run; B's all_gather from 64 KiB
// up is `slowdown` times slower.
std::vector<AbRound> sessions_rounds(size_t rounds, uint64_t seed, double noise, double slowdown) {
  std::mt19937_64 random(seed);
  std::normal_distribution<double> jitter(0, noise);
  const double states[] = {1.0, 2.5, 1.0, 0.8, 1.6, 1.0, 2.2, 0.9};
  std::vector<AbRound> out;
  for (size_t r = 0; r < rounds; ++r) {
    const double state = states[r % std::size(states)];
    AbRound round;
    round.a = one_run("a" + std::to_string(r), "mpi", [&](const std::string&, int64_t) { return state * std::exp(jitter(random)); });
    round.b = one_run("b" + std::to_string(r), "mpi", [&](const std::string& op, int64_t bytes) {
      return state * std::exp(jitter(random)) * (op == "all_gather" && bytes >= 65536 ? slowdown : 1);
    });
    out.push_back(std::move(round));
  }
  return out;
}

// The machine's states (1x to 2.5x from round to round) hide a 25% slowdown from any gate of
// unpaired runs, and the pairs cancel them: B's all_gather from 64 KiB up is `different`, worse,
// by about +25%, and nothing else is different.
TEST(Ab, ASlowdownUnderTheMachinesStatesIsDifferentAndOnlyThere) {
  const AbComparison c = compare_ab(sessions_rounds(8, 1, 0.03, 1.25), {});
  EXPECT_EQ(c.rounds, 8u);
  EXPECT_EQ(c.measurements, 6u);  // the times; each bandwidth is its time's
  EXPECT_DOUBLE_EQ(c.row_alpha, 0.05 / 6);
  for (const AbRow& row : c.rows) {
    if (row.direction == Direction::not_judged) {
      EXPECT_EQ(row.verdict, AbVerdict::not_judged);
      continue;
    }
    const bool slowed = row.a.labels.op == "all_gather" && row.a.labels.bytes >= 65536;
    EXPECT_EQ(row.verdict == AbVerdict::different, slowed) << row.label << " " << row.a.metric << ": " << row.reason;
    if (!slowed) continue;
    EXPECT_TRUE(row.b_worse) << row.reason;
    const double expected = row.a.metric == "time" ? 0.25 : 1 / 1.25 - 1;
    EXPECT_NEAR(row.change, expected, 0.05) << row.reason;
    EXPECT_LT(row.low, row.change);
    EXPECT_GT(row.high, row.change);
    EXPECT_NE(row.reason.find("worse than A beyond the paired noise"), std::string::npos) << row.reason;
  }
  EXPECT_EQ(c.different, 2u * 3);
  EXPECT_EQ(c.b_worse, 2u * 3);
  // The same runs as a gate of 7 unpaired baseline runs of A against one of B: the states make
  // every row blind, the slowdown unseen.
  std::vector<RecordedRun> baselines;
  const std::vector<AbRound> rounds = sessions_rounds(8, 1, 0.03, 1.25);
  for (size_t r = 0; r < 7; ++r) baselines.push_back({"a", rounds[r].a});
  const Comparison gate = compare_runs(baselines, {{"b", rounds[7].b}}, {});
  EXPECT_EQ(gate.regressions, 0u);
  EXPECT_GT(gate.blind, 0u);
}

// Identical stacks: the chance that a session calls some row `different` is the false-alarm rate
// at most. 1000 sessions of 5 rounds, 6 measurements each with 10% noise under the states: if the
// test is exact the count is at most Binomial(1000, 0.05), mean 50, sd 7; 75 allows 3.5 sd.
TEST(Ab, IdenticalStacksAreCalledDifferentAtMostAtTheFalseAlarmRate) {
  int alarms = 0;
  for (uint64_t session = 0; session < 1000; ++session) {
    const AbComparison c = compare_ab(sessions_rounds(5, 100 + session, 0.10, 1.0), {});
    alarms += c.different > 0 ? 1 : 0;
  }
  EXPECT_LE(alarms, 75);
  EXPECT_GE(alarms, 10) << "an exact test gives about 50: this one is blind";
  std::printf("# %d of 1000 sessions of identical stacks called a row different\n", alarms);
}

// A row whose pairs spread by +-20% cannot be placed against a 5% tolerance in 4 rounds: unknown,
// with the rounds that would decide it; with that many rounds of the same spread it is `same`.
TEST(Ab, UnknownSaysHowManyRoundsWouldDecide) {
  const auto rounds_of = [](size_t n) {
    std::vector<AbRound> out;
    for (size_t r = 0; r < n; ++r) {
      const double wobble = r % 2 == 0 ? 1.2 : 1 / 1.2;  // B against A, alternately
      out.push_back({one_run("a" + std::to_string(r), "mpi", [](const std::string&, int64_t) { return 1.0; }),
                     one_run("b" + std::to_string(r), "mpi", [&](const std::string&, int64_t) { return wobble; })});
    }
    return out;
  };
  const AbComparison c = compare_ab(rounds_of(4), {});
  EXPECT_EQ(c.unknown, 18u);  // time, algbw, busbw of 6 cases
  EXPECT_EQ(c.different + c.same, 0u);
  ASSERT_GT(c.rounds_needed, 4u);
  for (const AbRow& row : c.rows) {
    if (row.verdict != AbVerdict::unknown) continue;
    EXPECT_EQ(row.rounds_needed, c.rounds_needed);
    EXPECT_NE(row.reason.find("about " + std::to_string(row.rounds_needed) + " rounds would decide it"), std::string::npos)
        << row.reason;
  }
  // An even count keeps the mean at 0 and the spread as it was.
  const size_t enough = c.rounds_needed + c.rounds_needed % 2;
  const AbComparison decided = compare_ab(rounds_of(enough), {});
  EXPECT_EQ(decided.unknown, 0u) << enough;
  EXPECT_EQ(decided.same, 18u);
}

// A failed check on either side is not timed against the other: the row is not judged and says
// why (correctness is the runs' own verdicts). Fewer than 2 rounds, and jobs of other sizes, are
// refused.
TEST(Ab, FailedChecksFewRoundsAndOtherJobSizes) {
  std::vector<AbRound> rounds = sessions_rounds(3, 7, 0.01, 1.0);
  for (Record& r : rounds[1].b) {
    if (r.case_id == "all_reduce/f32/1024" && r.metric == "time") r.verdict = Verdict::fail;
  }
  const AbComparison c = compare_ab(rounds, {});
  size_t failed = 0;
  for (const AbRow& row : c.rows) {
    if (row.reason.find("a failed check in B (round 2)") == std::string::npos) continue;
    ++failed;
    EXPECT_EQ(row.verdict, AbVerdict::not_judged);
  }
  EXPECT_EQ(failed, 1u);
  EXPECT_THROW(compare_ab({rounds.front()}, {}), Error);
  for (Record& r : rounds[0].b) r.labels.world_size = 4;
  try {
    compare_ab(rounds, {});
    ADD_FAILURE() << "jobs of 2 and 4 ranks were compared";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("A ran a job of 2 ranks and B one of 4"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dts

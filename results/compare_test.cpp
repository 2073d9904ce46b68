// Tests of compare_runs and the Mann–Whitney U test: planted slowdowns and bandwidth drops are
// caught, identical runs and changes under the tolerance or inside the noise are not, verdict
// changes and lost cases are regressions, mismatched stacks and missing cases are errors, and the
// U test's p-values match known answers and a brute-force enumeration.
#include "results/compare.h"

#include <gtest/gtest.h>

#include <functional>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "results/testing/records.h"

namespace dts {
namespace {

// Five iterations a side, as the quick suite runs: the median time times these factors, a ±2%
// spread (p05 = 0.982, p95 = 1.018 of the median by linear interpolation).
const std::vector<double> kSpread{0.98, 0.99, 1.00, 1.01, 1.02};

Labels stack_labels() {
  Labels l;
  l.backend = "mpi";
  l.device = "cpu";
  l.host = "node-a";
  l.world_size = 4;
  l.nodes = 1;
  l.ranks_per_node = 4;
  return l;
}

// One collectives case as the suite writes it: time (with samples), algbw, busbw, wrong, max_ulp.
// `slowdown` scales the times; `busbw_scale` the busbw row alone.
std::vector<Record> collectives_case(const std::string& id, int64_t bytes, double median_time, double slowdown,
                                     double busbw_scale = 1, const std::vector<double>& spread = kSpread) {
  Record base;
  base.run_id = "run";
  base.suite = "collectives";
  base.case_id = id;
  base.labels = stack_labels();
  base.labels.op = "all_reduce";
  base.labels.dtype = "f32";
  base.labels.bytes = bytes;
  base.labels.placement = "out_of_place";
  base.labels.config = "redop=sum;root=-1;count=" + std::to_string(bytes / 4);
  std::vector<Record> rows;
  Record time = base;
  time.metric = "time";
  time.unit = "seconds";
  for (double f : spread) time.samples.push_back(median_time * slowdown * f);
  time.stats = compute_stats(time.samples);
  time.value = time.stats.median;
  rows.push_back(time);
  const auto bandwidth = [&](const char* metric, double factor) {
    Record r = base;
    r.metric = metric;
    r.unit = "bytes_per_second";
    const double b = static_cast<double>(bytes) * factor;
    r.stats = time.stats;
    r.stats.min = b / time.stats.max;
    r.stats.p05 = b / time.stats.p95;
    r.stats.median = b / time.stats.median;
    r.stats.p95 = b / time.stats.p05;
    r.stats.max = b / time.stats.min;
    r.value = r.stats.median;
    return r;
  };
  rows.push_back(bandwidth("algbw", 1));
  Record busbw = bandwidth("busbw", 1.5 * busbw_scale);  // 2(n-1)/n = 1.5 at n = 4
  rows.push_back(busbw);
  rows.push_back(testing::passing_wrong_row(base));
  Record ulp = base;
  ulp.metric = "max_ulp";
  ulp.unit = "ulp";
  ulp.value = 0;
  rows.push_back(ulp);
  return rows;
}

// Three cases, 8 B to 1 MiB, with times of a small-message latency and a large-message bandwidth.
std::vector<Record> run(double slowdown = 1, double busbw_scale = 1, const std::vector<double>& spread = kSpread) {
  std::vector<Record> all;
  for (const auto& [id, bytes, t] : {std::tuple<const char*, int64_t, double>{"all_reduce/f32/sum/8", 8, 4e-6},
                                     {"all_reduce/f32/sum/4096", 4096, 1.2e-5},
                                     {"all_reduce/f32/sum/1048576", 1048576, 3.5e-4}}) {
    for (Record& r : collectives_case(id, bytes, t, slowdown, busbw_scale, spread)) all.push_back(std::move(r));
  }
  return all;
}

// The same rows as a run of their own. compare tells runs apart by (run_id, repetition) and
// refuses a run as its own baseline, so a current run made from a baseline's rows is renamed.
std::vector<Record> rerun(std::vector<Record> rows, const std::string& run_id = "rerun") {
  for (Record& r : rows) r.run_id = run_id;
  return rows;
}

// The within-run rules (p05/p95, --samples) judge one baseline run when asked (--min-runs 1);
// timing verdicts otherwise need min_baseline_runs(false_alarm) runs (7 at the default 5%).
CompareSettings within_run(CompareSettings settings = {}) {
  settings.min_runs = 1;
  return settings;
}
// Timing verdicts from `runs` baseline runs up, for tests of fewer runs than the default's 7.
CompareSettings from_runs(size_t runs, CompareSettings settings = {}) {
  settings.min_runs = runs;
  return settings;
}

size_t count(const Comparison& c, const std::string& metric, Outcome outcome) {
  return static_cast<size_t>(std::count_if(c.rows.begin(), c.rows.end(), [&](const ComparedRow& r) {
    return (r.baseline.metric == metric || r.current.metric == metric) && r.outcome == outcome;
  }));
}

TEST(Compare, IdenticalRunsHaveNoRegressions) {
  const Comparison c = compare_runs(run(), rerun(run()), within_run());
  EXPECT_EQ(c.regressions, 0u);
  EXPECT_EQ(c.improvements, 0u);
  EXPECT_EQ(c.rows.size(), 15u);     // 3 cases x 5 metrics
  EXPECT_EQ(c.unchanged, 9u);        // time, algbw, busbw of each case
  EXPECT_EQ(c.not_judged, 6u);       // wrong, max_ulp: no direction
  EXPECT_EQ(c.only_in_current, 0u);
}

// A file with a measurement twice (the same case listed twice by a run, or runs pasted
// together) is refused, naming the row, in either position: pairing its rows with the other
// file's would be arbitrary (once, each of 420 such rows was reported as a regression).
TEST(Compare, AFileWithARowTwiceIsRefused) {
  std::vector<Record> twice = run();
  twice.push_back(twice[1]);  // a copy of the first case's second row
  for (const bool in_baseline : {true, false}) {
    try {
      if (in_baseline) compare_runs(twice, rerun(run()), {});
      else compare_runs(run(), rerun(twice), {});
      ADD_FAILURE() << "accepted a file with a repeated row";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
      const std::string text = e.what();
      EXPECT_NE(text.find(in_baseline ? "the baseline has the row " : "the current run has the row "), std::string::npos)
          << text;
      EXPECT_NE(text.find(twice[1].case_id + " " + twice[1].metric), std::string::npos) << text;
    }
  }
}

TEST(Compare, TwentyPercentSlowerTimesAreCaught) {
  // 1.2x: past the 5% tolerance, and the current p05 (1.2 * 0.982 = 1.178) is above the baseline
  // p95 (1.018): outside the noise. Bandwidths fall to 1/1.2 = 83%: caught too.
  const Comparison c = compare_runs(run(), rerun(run(1.2)), within_run());
  EXPECT_EQ(count(c, "time", Outcome::regressed), 3u);
  EXPECT_EQ(count(c, "algbw", Outcome::regressed), 3u);
  EXPECT_EQ(count(c, "busbw", Outcome::regressed), 3u);
  EXPECT_EQ(c.regressions, 9u);
  for (const ComparedRow& row : c.rows) {
    if (row.baseline.metric == "time") {
      EXPECT_NEAR(row.change_percent, 20, 1e-9);  // (1.2 - 1) / 1, in percent
      EXPECT_EQ(row.label, row.baseline.case_id + " out_of_place");
    }
  }
}

TEST(Compare, TwentyPercentBusbwDropIsCaughtAlone) {
  const Comparison c = compare_runs(run(), rerun(run(1, 0.8)), within_run());
  EXPECT_EQ(count(c, "busbw", Outcome::regressed), 3u);
  EXPECT_EQ(count(c, "time", Outcome::unchanged), 3u);
  EXPECT_EQ(c.regressions, 3u);
}

TEST(Compare, FasterIsAnImprovementNotARegression) {
  const Comparison c = compare_runs(run(1.2), rerun(run()), within_run());  // the reverse of the slowdown
  EXPECT_EQ(c.regressions, 0u);
  EXPECT_EQ(c.improvements, 9u);
}

TEST(Compare, ChangeUnderTheToleranceIsNotFlagged) {
  // 4% slower: the intervals are disjoint (1.04 * 0.982 = 1.021 > 1.018) but 4% < 5%.
  const Comparison c = compare_runs(run(), rerun(run(1.04)), within_run());
  EXPECT_EQ(c.regressions, 0u);
  // The same change against a 3% tolerance is a regression: the tolerance decided.
  CompareSettings strict = within_run();
  strict.tolerance = 0.03;
  EXPECT_EQ(compare_runs(run(), rerun(run(1.04)), strict).regressions, 9u);
}

TEST(Compare, ChangeInsideTheNoiseIsNotFlagged) {
  // ±30% spread: a 10% slowdown is past the tolerance, but the current p05 (1.1 * 0.76 = 0.836)
  // is far below the baseline p95 (1.26): the runs' own noise covers it.
  const std::vector<double> wide{0.7, 0.85, 1.0, 1.15, 1.3};
  const Comparison c = compare_runs(run(1, 1, wide), rerun(run(1.1, 1, wide)), within_run());
  EXPECT_EQ(c.regressions, 0u);
  // Nor could it have seen a change of the tolerance: what it sees is the baseline's own p05..p95
  // (0.76 .. 1.26, +66%), so the rows are blind, not unchanged.
  EXPECT_EQ(count(c, "time", Outcome::blind), 3u);
  EXPECT_EQ(c.blind, 9u);
  for (const ComparedRow& row : c.rows) {
    if (row.baseline.metric == "time") {
      EXPECT_NE(row.reason.find("inside the noise"), std::string::npos) << row.reason;
      EXPECT_NE(row.reason.find("blind: sees only a worsening of +"), std::string::npos) << row.reason;
      EXPECT_NEAR(row.detectable_percent, (row.baseline.stats.p95 / row.baseline.stats.p05 - 1) * 100, 1e-9);
    }
  }
}

TEST(Compare, SamplesDecideWhereIntervalsOverlap) {
  // 20 iterations a side, baseline 1.00 .. 1.19, current the same shifted by 0.10 (about +9% at
  // the median). The intervals overlap (current p05 1.1095 < baseline p95 1.1805), so the p05/p95
  // rule calls it noise; the U test sees that nearly every current sample is slower: U is about
  // 345 of 400 pairs (current i beats baseline j when j < i + 10: 400 - 55 losses, give or take
  // the 10 pairs j = i + 10 that rounding may tie or swap), p far below 0.01.
  std::vector<double> spread;
  for (int i = 0; i < 20; ++i) spread.push_back(1.0 + 0.01 * i);
  std::vector<double> shifted;
  for (double s : spread) shifted.push_back(s + 0.10);
  std::vector<Record> baseline = collectives_case("all_reduce/f32/sum/8", 8, 1e-5, 1, 1, spread);
  std::vector<Record> current = collectives_case("all_reduce/f32/sum/8", 8, 1e-5, 1, 1, shifted);

  const Comparison by_intervals = compare_runs(baseline, rerun(current), within_run());
  EXPECT_EQ(count(by_intervals, "time", Outcome::blind), 1u);  // p95/p05 about +17%: blind to 5%

  CompareSettings with_samples = within_run();
  with_samples.use_samples = true;
  const Comparison by_samples = compare_runs(baseline, rerun(current), with_samples);
  EXPECT_EQ(count(by_samples, "time", Outcome::regressed), 1u);
  // Bandwidths carry no samples of their own: their time row's samples decide (a monotone map).
  EXPECT_EQ(count(by_samples, "busbw", Outcome::regressed), 1u);
  for (const ComparedRow& row : by_samples.rows) {
    if (row.baseline.metric == "time") {
      EXPECT_LT(row.p_value, 1e-4) << row.reason;
      EXPECT_NE(row.reason.find("U test"), std::string::npos);
    }
  }
  // Identical samples: p = P(U >= nm/2) is about one half: never significant.
  EXPECT_EQ(compare_runs(baseline, rerun(baseline), with_samples).regressions, 0u);
}

TEST(Compare, TooFewSamplesForTheUTestFallBackToIntervals) {
  // 3 a side: the smallest exact p is 1/C(6,3) = 0.05 > 0.01, so the test could never decide.
  const std::vector<double> three{0.99, 1.0, 1.01};
  CompareSettings with_samples = within_run();
  with_samples.use_samples = true;
  const Comparison c = compare_runs(run(1, 1, three), rerun(run(1.2, 1, three)), with_samples);
  EXPECT_EQ(count(c, "time", Outcome::regressed), 3u);
  for (const ComparedRow& row : c.rows) {
    if (row.baseline.metric == "time") {
      EXPECT_NE(row.reason.find("too few samples"), std::string::npos) << row.reason;
    }
  }
}

TEST(Compare, VerdictTurningToFailIsARegression) {
  std::vector<Record> current = run();
  for (Record& r : current) {
    if (r.metric == "wrong" && r.labels.bytes == 4096) {
      r.value = 3;
      r.verdict = Verdict::fail;
      r.detail = "first: rank 1";
    }
  }
  const Comparison c = compare_runs(run(), rerun(current), {});
  EXPECT_EQ(c.regressions, 1u);
  EXPECT_EQ(count(c, "wrong", Outcome::regressed), 1u);
}

// The check row that stands for a case that did not run (skip or fail), with its labels.
Record not_run_row(Verdict verdict) {
  Record check = run()[5];  // a row of the 4096 B case
  check.metric = "check";
  check.unit = "";
  check.value = 0;
  check.stats = {};
  check.samples.clear();
  check.labels.placement = "";
  check.verdict = verdict;
  check.detail = "unsupported";
  return check;
}

TEST(Compare, CaseThatNoLongerRunsIsOneRegression) {
  // The 4096 B case is skipped now: one `check` row instead of its five measurements.
  std::vector<Record> current;
  for (const Record& r : run()) {
    if (r.labels.bytes != 4096) current.push_back(r);
  }
  current.push_back(not_run_row(Verdict::skip));
  const Comparison c = compare_runs(run(), rerun(current), {});
  EXPECT_EQ(c.regressions, 1u);
  EXPECT_EQ(count(c, "check", Outcome::regressed), 1u);
}

TEST(Compare, CaseThatRunsNowIsNotMissing) {
  // Skipped (or failing to run) in the baseline, measured now: support was added or a failure
  // fixed. Not a missing row: not judged for a skip, an improvement for a failure.
  for (const Verdict verdict : {Verdict::skip, Verdict::fail, Verdict::timeout}) {
    std::vector<Record> baseline;
    for (const Record& r : run()) {
      if (r.labels.bytes != 4096) baseline.push_back(r);
    }
    baseline.push_back(not_run_row(verdict));
    const Comparison c = compare_runs(baseline, rerun(run()), {});
    EXPECT_EQ(c.regressions, 0u) << name(verdict);
    EXPECT_EQ(count(c, "check", verdict == Verdict::skip ? Outcome::not_judged : Outcome::improved), 1u);
  }
}

TEST(Compare, NewCaseThatIsSkippedIsNotARegression) {
  // A case the baseline never had, skipped now: nothing "no longer runs".
  std::vector<Record> baseline;
  for (const Record& r : run()) {
    if (r.labels.bytes != 4096) baseline.push_back(r);
  }
  std::vector<Record> current = baseline;
  current.push_back(not_run_row(Verdict::skip));
  const Comparison c = compare_runs(baseline, rerun(current), {});
  EXPECT_EQ(c.regressions, 0u);
  EXPECT_EQ(c.only_in_current, 1u);
}

TEST(Compare, ValueThatStopsBeingANumberIsARegression) {
  std::vector<Record> current = run();
  current[0].value = std::nan("");                         // a time
  current[2].value = std::numeric_limits<double>::infinity();  // a busbw
  const Comparison c = compare_runs(run(), rerun(current), {});
  EXPECT_EQ(count(c, "time", Outcome::regressed), 1u);
  EXPECT_EQ(count(c, "busbw", Outcome::regressed), 1u);
}

TEST(Compare, GrowthFromAZeroBaselineIsJudgedByTheNoise) {
  // No relative change exists from 0. A zero baseline with zero spread and a current p05 above it
  // is outside the noise: a regression for a time; 0 -> 0 is unchanged.
  std::vector<Record> baseline = run(), current = run();
  for (std::vector<Record>* rows : {&baseline, &current}) {
    Record& t = (*rows)[0];
    const double scale = rows == &baseline ? 0.0 : 1.0;
    for (double& v : t.samples) v *= scale;
    t.stats = compute_stats(t.samples);
    t.value = t.stats.median;
  }
  const Comparison c = compare_runs(baseline, rerun(current), within_run());
  EXPECT_EQ(count(c, "time", Outcome::regressed), 1u);
  const Comparison same = compare_runs(baseline, rerun(baseline), within_run());
  EXPECT_EQ(same.regressions, 0u);
}

TEST(MannWhitney, NanSamplesAreLeftOut) {
  // A NaN has no rank: the test runs on the numbers (and ends: NaN equals nothing, not even
  // itself, so it must not reach the tie count). Complete separation of 4 vs 5 is 1/C(9,4).
  const double p = mann_whitney_p_greater({2.0, 2.1, 2.2, 2.3, std::nan("")}, {1.0, 1.1, 1.2, 1.3, 1.4});
  EXPECT_NEAR(p, 1.0 / 126, 1e-12);
}

TEST(Compare, MemoryGrowthBeyondToleranceIsARegression) {
  Record memory;
  memory.suite = "equivalence";
  memory.case_id = "zero2/f32/dp4";
  memory.labels = stack_labels();
  memory.metric = "memory_optimizer";
  memory.unit = "bytes";
  memory.value = 1000;
  Record grown = memory;
  grown.value = 1100;  // +10%: past 5%; no distribution, so the tolerance alone decides
  EXPECT_EQ(compare_runs({memory}, rerun({grown}), {}).regressions, 1u);
  grown.value = 1040;  // +4%: under the tolerance
  EXPECT_EQ(compare_runs({memory}, rerun({grown}), {}).regressions, 0u);
}

TEST(Compare, UnjudgedMetricsAreShownNotJudged) {
  std::vector<Record> current = run();
  for (Record& r : current) {
    if (r.metric == "max_ulp") r.value = 7;  // error sizes have verdicts of their own
  }
  const Comparison c = compare_runs(run(), rerun(current), {});
  EXPECT_EQ(c.regressions, 0u);
  EXPECT_EQ(count(c, "max_ulp", Outcome::not_judged), 3u);
}

TEST(Compare, MissingCasesAreAnError) {
  std::vector<Record> current;
  for (const Record& r : run()) {
    if (r.labels.bytes != 1048576) current.push_back(r);
  }
  try {
    compare_runs(run(), rerun(current), {});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("1 case(s) of the baseline are missing"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("all_reduce/f32/sum/1048576"), std::string::npos) << e.what();
  }
  // The other way round is fine: extra cases in the current run are new, not judged.
  const Comparison c = compare_runs(current, rerun(run()), {});
  EXPECT_EQ(c.only_in_current, 5u);
  EXPECT_EQ(c.regressions, 0u);
}

TEST(Compare, MismatchedStacksAreAnError) {
  const auto expect_mismatch = [](const std::string& field, auto change) {
    std::vector<Record> current = run();
    for (Record& r : current) change(r.labels);
    try {
      compare_runs(run(), rerun(current), {});
      ADD_FAILURE() << "no error for " << field;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("different stacks: " + field), std::string::npos) << e.what();
    }
  };
  expect_mismatch("backend 'mpi' (baseline) vs 'ring(mpi)' (current)", [](Labels& l) { l.backend = "ring(mpi)"; });
  expect_mismatch("device", [](Labels& l) { l.device = "cuda:NVIDIA H100"; });
  expect_mismatch("world_size 4 (baseline) vs 2 (current)", [](Labels& l) { l.world_size = 2; });
  expect_mismatch("nodes", [](Labels& l) { l.nodes = 2; });
  expect_mismatch("ranks_per_node", [](Labels& l) { l.ranks_per_node = 2; });
  // Open MPI's transport choices are the stack's too: `--mca btl tcp,self` against the default,
  // and `--mca op ^avx` against its AVX op (which the 8-bit saturation depends on).
  expect_mismatch("mpi_config '' (baseline) vs 'btl=tcp,self' (current)", [](Labels& l) { l.mpi_config = "btl=tcp,self"; });
  {
    std::vector<Record> baseline = run(), current = run();
    for (Record& r : baseline) r.labels.mpi_config = "op=^avx";
    try {
      compare_runs(baseline, rerun(current), {});
      ADD_FAILURE() << "no error for op=^avx";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("mpi_config 'op=^avx' (baseline) vs '' (current)"), std::string::npos)
          << e.what();
    }
  }
  // Host, run id and versions are not the stack's identity: a rerun on another node of the
  // same kind compares.
  std::vector<Record> current = run();
  for (Record& r : current) {
    r.labels.host = "node-b";
    r.run_id = "other";
    r.labels.backend_version = "newer";
  }
  EXPECT_EQ(compare_runs(run(), current, {}).regressions, 0u);
}

// The equivalence suite's rows of one strategy in a `job`-rank job: a case per sub-world of 1..job
// ranks, each row saying who took part (world_size, nodes, ranks_per_node) and the job in config.
// Ranks fill node after node, `per_node` on each, as a launcher places them by default.
std::vector<Record> equivalence_rows(int job, int per_node, const std::string& run_id = "run") {
  std::vector<Record> rows;
  for (int w = 1; w <= job; ++w) {
    Record r;
    r.run_id = run_id;
    r.suite = "equivalence";
    r.case_id = "ddp/f32/sgd/dp" + std::to_string(w);
    r.labels = stack_labels();
    r.labels.world_size = w;
    r.labels.nodes = (w + per_node - 1) / per_node;
    r.labels.ranks_per_node = std::min(w, per_node);
    r.labels.strategy = "ddp";
    r.labels.dtype = "f32";
    r.labels.config = "dp=" + std::to_string(w) + ";zero=0;mb=1;steps=5;batch=64;optimizer=sgd;job=" + std::to_string(job);
    r.metric = "max_abs_error";
    r.value = 1e-7;
    r.threshold = 1e-5;
    r.verdict = Verdict::pass;
    rows.push_back(r);
    r.metric = "step_time";
    r.unit = "seconds";
    r.samples = {1e-3 * 0.98, 1e-3, 1e-3 * 1.02};
    r.stats = compute_stats(r.samples);
    r.value = r.stats.median;
    r.threshold = std::numeric_limits<double>::quiet_NaN();
    r.verdict = Verdict::info;
    rows.push_back(r);
  }
  return rows;
}

// A run of the collectives (every rank of the job) and the equivalence suite (sub-worlds).
std::vector<Record> mixed_run(int job, int nodes, const std::string& run_id) {
  std::vector<Record> all = run();
  const int per_node = job / nodes;
  for (Record& r : all) {
    r.run_id = run_id;
    r.labels.world_size = job;
    r.labels.nodes = nodes;
    r.labels.ranks_per_node = per_node;
  }
  for (Record& r : equivalence_rows(job, per_node, run_id)) all.push_back(std::move(r));
  return all;
}

TEST(JobSize, FromConfigElseWorldSize) {
  Record r;
  r.labels.world_size = 2;
  EXPECT_EQ(job_size(r), 2);  // no config: a whole-job row
  r.labels.config = "dp=2;job=4";
  EXPECT_EQ(job_size(r), 4);
  r.labels.config = "job=8;dp=2";
  EXPECT_EQ(job_size(r), 8);
  // Not the key job, or not a size: the row's own world_size.
  for (const char* config : {"subjob=4;dp=2", "dp=2;job=", "dp=2;job=four", "job=4x", "job=0"}) {
    r.labels.config = config;
    EXPECT_EQ(job_size(r), 2) << config;
  }
}

TEST(JobStacks, ARunOfWholeJobAndSubWorldRowsIsOneStack) {
  // 4 ranks on 2 nodes, 2 each: the sub-worlds of 1 and 2 ranks sit on one node, those of 3 and
  // 4 span both; the collectives rows and the 4-rank sub-world say the job's own layout.
  const std::vector<JobStack> stacks = job_stacks(mixed_run(4, 2, "a"));
  ASSERT_EQ(stacks.size(), 1u);
  EXPECT_EQ(stacks[0], (JobStack{"mpi", "cpu", "", 4, 2, 2}));
  // The equivalence rows alone: the widest sub-world is the whole job.
  EXPECT_EQ(job_stacks(equivalence_rows(4, 2)), stacks);
  // Two runs of one stack in one file are one stack; a run of another job size is another.
  std::vector<Record> two_runs = mixed_run(4, 2, "a");
  for (Record& r : mixed_run(4, 2, "b")) two_runs.push_back(std::move(r));
  EXPECT_EQ(job_stacks(two_runs), stacks);
  for (Record& r : mixed_run(2, 1, "c")) two_runs.push_back(std::move(r));
  EXPECT_EQ(job_stacks(two_runs), (std::vector<JobStack>{stacks[0], {"mpi", "cpu", "", 2, 1, 2}}));
}

TEST(Compare, RunsWithSubWorldRowsOfOneJobCompare) {
  // Two runs of a 4-rank job: collectives rows at world_size 4, equivalence rows at 1..4 with
  // job=4. They compare as one stack, and each sub-world's rows join with their own.
  const std::vector<Record> baseline = mixed_run(4, 1, "base"), current = mixed_run(4, 1, "now");
  const Comparison c = compare_runs(baseline, current, {});
  EXPECT_EQ(c.regressions, 0u);
  EXPECT_EQ(c.only_in_current, 0u);
  EXPECT_EQ(c.rows.size(), baseline.size());
  for (const ComparedRow& row : c.rows) {
    EXPECT_EQ(row.current.labels.world_size, row.baseline.labels.world_size) << row.label;
  }
  // A baseline of the collectives alone against a run that adds the equivalence suite: one job
  // on both sides (its sub-worlds of 1..3 ranks are not other stacks); the new rows are new.
  std::vector<Record> collectives_only;
  for (const Record& r : baseline) {
    if (r.suite == "collectives") collectives_only.push_back(r);
  }
  const Comparison added = compare_runs(collectives_only, current, {});
  EXPECT_EQ(added.regressions, 0u);
  EXPECT_EQ(added.only_in_current, current.size() - collectives_only.size());
}

TEST(Compare, JobOfAnotherSizeIsStillRefused) {
  // A 2-rank job's sub-worlds (1, 2) are a subset of a 4-rank job's by world_size, but the job is
  // not the same: refused (exit 2 in the command), whichever side is the baseline.
  const auto expect_refused = [](const std::vector<Record>& baseline, const std::vector<Record>& current,
                                 const std::string& difference) {
    try {
      compare_runs(baseline, current, {});
      ADD_FAILURE() << "no error for " << difference;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("different stacks: " + difference), std::string::npos) << e.what();
    }
  };
  expect_refused(mixed_run(4, 1, "base"), mixed_run(2, 1, "now"),
                 "world_size 4 (baseline) vs 2 (current), ranks_per_node 4 (baseline) vs 2 (current)");
  expect_refused(mixed_run(2, 1, "base"), mixed_run(4, 1, "now"), "world_size 2 (baseline) vs 4 (current)");
  expect_refused(equivalence_rows(4, 4), equivalence_rows(2, 2, "now"), "world_size 4 (baseline) vs 2 (current)");
  // Same job size, other layout: 4 ranks on one node vs on two.
  expect_refused(mixed_run(4, 1, "base"), mixed_run(4, 2, "now"), "nodes 1 (baseline) vs 2 (current)");
}

TEST(MannWhitney, KnownAnswersForCompleteSeparation) {
  const std::vector<double> low{1, 2, 3, 4, 5}, high{6, 7, 8, 9, 10};
  // Every high value beats every low one: U = 25, the largest of C(10,5) = 252 equally likely
  // arrangements, so p = 1/252.
  EXPECT_NEAR(mann_whitney_p_greater(high, low), 1.0 / 252, 1e-15);
  // Swap one adjacent pair (5 and 6): U = 24; arrangements with U >= 24 are two, p = 2/252.
  EXPECT_NEAR(mann_whitney_p_greater({5, 7, 8, 9, 10}, {1, 2, 3, 4, 6}), 2.0 / 252, 1e-15);
  // The other direction: every arrangement has U >= 0, p = 1.
  EXPECT_NEAR(mann_whitney_p_greater(low, high), 1.0, 1e-15);
  EXPECT_NEAR(mann_whitney_smallest_p(5, 5), 1.0 / 252, 1e-15);
  EXPECT_NEAR(mann_whitney_smallest_p(3, 3), 1.0 / 20, 1e-15);  // C(6,3) = 20
}

// The exact tail against an enumeration of every split of the pooled values: C(10,4) = 210 for
// 4 vs 6 samples, each split equally likely when nothing changed.
TEST(MannWhitney, ExactTailMatchesBruteForce) {
  const std::vector<double> worse{3.1, 4.7, 5.2, 9.9}, better{1.0, 2.2, 3.3, 4.1, 6.0, 7.5};
  std::vector<double> pooled(worse);
  pooled.insert(pooled.end(), better.begin(), better.end());
  const auto u_of = [](const std::vector<double>& x, const std::vector<double>& y) {
    double u = 0;
    for (double a : x) {
      for (double b : y) u += a > b ? 1 : 0;
    }
    return u;
  };
  const double observed = u_of(worse, better);
  int at_least = 0, total = 0;
  for (unsigned mask = 0; mask < (1u << 10); ++mask) {
    if (__builtin_popcount(mask) != 4) continue;
    std::vector<double> x, y;
    for (unsigned i = 0; i < 10; ++i) ((mask >> i) & 1 ? x : y).push_back(pooled[i]);
    ++total;
    if (u_of(x, y) >= observed) ++at_least;
  }
  ASSERT_EQ(total, 210);
  EXPECT_NEAR(mann_whitney_p_greater(worse, better), static_cast<double>(at_least) / total, 1e-12);
}

TEST(MannWhitney, LargeSamplesUseTheNormalApproximation) {
  // 60 a side, past the exact limit. Identical samples: every value is tied with its twin, so
  // U = nm/2 exactly, z = -0.5 / sd = -0.5 / 190.5, p = 0.501: just above one half.
  std::vector<double> a;
  for (int i = 0; i < 60; ++i) a.push_back(i);
  const double p_same = mann_whitney_p_greater(a, a);
  EXPECT_GT(p_same, 0.5);
  EXPECT_LT(p_same, 0.55);
  // Shifted past every value: complete separation, z = (3600 - 1800 - 0.5) / sqrt(3600 * 121 / 12)
  // = 1799.5 / 190.5 = 9.45: p ~ 1e-21.
  std::vector<double> b;
  for (double v : a) b.push_back(v + 100);
  EXPECT_LT(mann_whitney_p_greater(b, a), 1e-18);
  EXPECT_GT(mann_whitney_p_greater(b, a), 1e-24);
}

// Several runs: `scales[k]` multiplies the times of run k (its between-run drift), and
// `slow_case` (an id, or "") takes `slowdown` on top.
std::vector<RecordedRun> runs_of(const std::vector<double>& scales, const std::string& run_prefix,
                         const std::string& slow_case = "", double slowdown = 1) {
  std::vector<RecordedRun> runs;
  for (size_t k = 0; k < scales.size(); ++k) {
    std::vector<Record> rows;
    for (const auto& [id, bytes, t] : {std::tuple<const char*, int64_t, double>{"all_reduce/f32/sum/8", 8, 4e-6},
                                       {"all_reduce/f32/sum/4096", 4096, 1.2e-5},
                                       {"all_reduce/f32/sum/1048576", 1048576, 3.5e-4}}) {
      const double scale = scales[k] * (id == slow_case ? slowdown : 1);
      for (Record& r : collectives_case(id, bytes, t, scale)) {
        r.run_id = run_prefix + std::to_string(k);
        rows.push_back(std::move(r));
      }
    }
    runs.push_back({"file" + std::to_string(k), rows});
  }
  return runs;
}

size_t count_runs(const Comparison& c, const std::string& metric, Outcome outcome) { return count(c, metric, outcome); }

// The runs' own intervals (±2%) see no drift between runs: a current run 10% slower everywhere
// is a regression against one baseline run, and inside the noise against three that drifted
// by ±10% among themselves.
TEST(CompareRuns, DriftSeenInTheBaselineRunsIsNotARegression) {
  const std::vector<RecordedRun> current = runs_of({1.10}, "c");
  EXPECT_EQ(compare_runs(runs_of({1.0}, "b"), current, within_run()).regressions, 9u);  // time, algbw, busbw x 3
  const Comparison c = compare_runs(runs_of({0.9, 1.0, 1.1}, "b"), current, from_runs(3));
  EXPECT_EQ(c.regressions, 0u);
  EXPECT_EQ(c.baseline_runs, 3u);
  EXPECT_EQ(c.noise_judged, 9u);
  EXPECT_EQ(c.noise_measurements, 3u);  // algbw and busbw are the time's
  // The time family's sets: every size, from 4 KiB up, up to 4 KiB (the bandwidths' are the times').
  EXPECT_EQ(c.family_tests, 3u);
  EXPECT_DOUBLE_EQ(c.row_alpha, 0.05 / 2 / 3);  // half the false-alarm rate to the rows, half to the sets
  EXPECT_DOUBLE_EQ(c.family_alpha, 0.05 / 2 / 3);
  for (const ComparedRow& row : c.rows) {
    if (row.direction == Direction::not_judged) continue;
    EXPECT_EQ(row.baseline_runs, 3u);
    EXPECT_NE(row.reason.find("inside the between-run noise"), std::string::npos) << row.reason;
  }
}

// Baseline runs within ±1% of each other (below the runs' own ±2% iteration spread): the floor of
// each run's own noise and the pool of like rows keep a 25% slowdown of one case caught and the
// other cases unflagged; the reason gives the change and the noise it was judged against.
TEST(CompareRuns, ASlowdownBeyondTheNoiseIsCaughtAndExplained) {
  const std::vector<RecordedRun> baseline = runs_of({0.99, 1.0, 1.01, 1.0, 0.995}, "b");
  const Comparison c = compare_runs(baseline, runs_of({1.0}, "c", "all_reduce/f32/sum/1048576", 1.25), from_runs(5));
  EXPECT_EQ(c.regressions, 3u);
  for (const ComparedRow& row : c.rows) {
    const bool slow = row.baseline.case_id == "all_reduce/f32/sum/1048576" && row.direction != Direction::not_judged;
    EXPECT_EQ(row.outcome == Outcome::regressed, slow) << row.label << " " << row.baseline.metric << ": " << row.reason;
    if (!slow) continue;
    EXPECT_NEAR(row.change_percent, row.baseline.metric == "time" ? 25 : -20, 1e-9);
    EXPECT_NE(row.reason.find("+25% worse, beyond the +"), std::string::npos) << row.reason;
    EXPECT_NE(row.reason.find("over 5 baseline runs"), std::string::npos) << row.reason;
    EXPECT_LT(row.allowed_percent, 25);
    EXPECT_LT(row.p_value, c.row_alpha);
  }
  // Faster by 25%: an improvement, by the same rule.
  const Comparison faster = compare_runs(baseline, runs_of({0.8}, "c"), from_runs(5));
  EXPECT_EQ(faster.regressions, 0u);
  EXPECT_EQ(faster.improvements, 9u);
}

// A family: all_gather at 8 sizes, each row with noise of its own (a seeded ±20%, independent
// from row to row and run to run), 15 baseline runs. `shift(k)` multiplies every size from 64 KiB
// up in run k: a regression of the collective's bandwidth, or a machine state shared by the rows.
std::vector<RecordedRun> family_runs(size_t runs, const std::string& prefix, uint32_t seed,
                                     const std::function<double(size_t)>& shift) {
  std::vector<RecordedRun> out;
  uint32_t state = seed;
  const auto noise = [&] {  // uniform in [0.8, 1.2): a spread no single row's test sees 25% through
    state = state * 1664525u + 1013904223u;
    return 0.8 + 0.4 * static_cast<double>(state >> 8) / static_cast<double>(1u << 24);
  };
  for (size_t k = 0; k < runs; ++k) {
    std::vector<Record> rows;
    for (int64_t bytes = 1024; bytes <= (int64_t{16} << 20); bytes *= 4) {
      const double scale = noise() * (bytes >= 65536 ? shift(k) : 1);
      const double time = 1e-5 * static_cast<double>(bytes) / 1024;
      for (Record& r : collectives_case("all_gather/f32/" + std::to_string(bytes), bytes, time, scale)) {
        r.labels.op = "all_gather";
        r.labels.config = "count=" + std::to_string(bytes / 8);
        r.run_id = prefix + std::to_string(k);
        rows.push_back(std::move(r));
      }
    }
    out.push_back({"file", rows});
  }
  return out;
}

// 25% slower from 64 KiB up: each row alone stays inside its ±20% noise, the sizes together do
// not, and the flagged rows say so; without the slowdown nothing is flagged.
TEST(CompareRuns, AFamilyMovedTogetherIsCaughtThoughEachRowIsInsideItsNoise) {
  const std::vector<RecordedRun> baseline = family_runs(15, "b", 7, [](size_t) { return 1.0; });
  const std::vector<RecordedRun> slowed = family_runs(5, "c", 11, [](size_t) { return 1.25; });
  CompareSettings settings;
  const Comparison c = compare_runs(baseline, slowed, settings);
  EXPECT_GT(c.family_tests, 0u);
  size_t flagged = 0, by_family = 0, by_row = 0;
  for (const ComparedRow& row : c.rows) {
    if (row.outcome != Outcome::regressed) continue;
    ++flagged;
    EXPECT_GE(row.baseline.labels.bytes, 65536) << row.label << ": " << row.reason;
    by_family += row.reason.find("worse, with its family: all_gather f32 out_of_place") != std::string::npos;
    by_row += row.reason.find("worse, beyond the") != std::string::npos;
  }
  EXPECT_EQ(by_family + by_row, flagged);
  EXPECT_GT(by_family, 0u);  // caught only through their family
  EXPECT_GT(flagged, 6u);    // most of the 5 sizes' time, algbw and busbw rows (15)

  const Comparison unchanged = compare_runs(baseline, family_runs(5, "u", 13, [](size_t) { return 1.0; }), settings);
  EXPECT_EQ(unchanged.regressions, 0u);
}

// A state that moves all of a run's large sizes together (here ±30% from run to run) is between-
// run noise of the family: a current run 25% slower in the same way is inside it.
TEST(CompareRuns, AFamilyShiftSeenInTheBaselineRunsIsNotARegression) {
  const auto state = [](size_t k) { return k % 3 == 0 ? 1.3 : k % 3 == 1 ? 0.75 : 1.0; };
  const std::vector<RecordedRun> baseline = family_runs(15, "b", 7, state);
  const Comparison c = compare_runs(baseline, family_runs(5, "c", 11, [](size_t) { return 1.25; }), {});
  EXPECT_EQ(c.regressions, 0u);
}

// A change under the tolerance is never a regression, however quiet the runs.
TEST(CompareRuns, TheToleranceStillHolds) {
  const std::vector<RecordedRun> baseline = runs_of({1.0, 1.0, 1.0}, "b");
  const Comparison c = compare_runs(baseline, runs_of({1.04}, "c"), from_runs(3));
  EXPECT_EQ(c.regressions, 0u);
  EXPECT_EQ(count_runs(c, "time", Outcome::unchanged), 3u);
  CompareSettings strict = from_runs(3);
  strict.tolerance = 0.01;
  EXPECT_EQ(compare_runs(baseline, runs_of({1.04}, "c"), strict).regressions, 9u);
}

// Fewer baseline runs than the false-alarm rate needs (7 at 5%: min_baseline_runs): no timing
// verdict, however large the change, since a state none of them showed would fail an unchanged
// stack too often; every timing row is blind, detectable nothing, cured by 7 runs. Verdicts,
// missing rows and memory (no run-to-run noise) are judged as before.
TEST(CompareRuns, FewerBaselineRunsThanTheRateNeedsGiveNoTimingVerdict) {
  for (const std::vector<double>& scales : {std::vector<double>{1.0}, {1.0, 1.01, 0.99, 1.0, 1.0, 1.01}}) {
    const Comparison c = compare_runs(runs_of(scales, "b"), runs_of({3.0}, "c"), {});  // 3x slower
    EXPECT_EQ(c.min_runs, 7u);
    EXPECT_EQ(c.regressions, 0u) << scales.size();
    EXPECT_EQ(c.blind, 9u);  // time, algbw, busbw of 3 cases
    EXPECT_EQ(c.detect_nothing, 9u);
    for (const ComparedRow& row : c.rows) {
      if (row.direction == Direction::not_judged) continue;
      EXPECT_TRUE(std::isinf(row.detectable_percent)) << row.label;
      EXPECT_EQ(row.cure, Cure::runs);
      EXPECT_EQ(row.cure_runs, 7u);
      EXPECT_NE(row.reason.find("fewer than the 7 a 5% false-alarm rate needs"), std::string::npos) << row.reason;
    }
  }
  // With the seventh run the same slowdown is judged, and caught.
  const Comparison judged = compare_runs(runs_of({1.0, 1.01, 0.99, 1.0, 1.0, 1.01, 0.995}, "b"), runs_of({3.0}, "c"), {});
  EXPECT_EQ(judged.regressions, 9u);
  EXPECT_EQ(judged.blind, 0u);
  // A row of 0 in both runs (a bandwidth of 0 bytes) moved nowhere: unchanged, not blind.
  std::vector<RecordedRun> zero_base = runs_of({1.0}, "b"), zero_now = runs_of({3.0}, "c");
  for (std::vector<RecordedRun>* side : {&zero_base, &zero_now}) {
    for (Record& r : side->front().rows) {
      if (r.metric == "algbw" && r.labels.bytes == 8) r.value = 0;
    }
  }
  const Comparison zero = compare_runs(zero_base, zero_now, {});
  EXPECT_EQ(zero.blind, 8u);
  EXPECT_EQ(zero.unchanged, 1u);
  // Memory (a byte count the layout fixes) is judged from 3 baseline runs as from 7: +50% fails.
  std::vector<RecordedRun> memory_base, memory_now;
  for (size_t k = 0; k < 4; ++k) {
    Record m;
    m.run_id = (k < 3 ? "mb" : "mc") + std::to_string(k);
    m.suite = "equivalence";
    m.case_id = "zero2/f32/dp4";
    m.labels = stack_labels();
    m.metric = "memory_optimizer";
    m.unit = "bytes";
    m.value = k < 3 ? 1000 : 1500;
    (k < 3 ? memory_base : memory_now).push_back({"file", {m}});
  }
  const Comparison memory = compare_runs(memory_base, memory_now, {});
  EXPECT_EQ(memory.regressions, 1u);
  EXPECT_EQ(memory.blind, 0u);
  // A failed check is a regression from one baseline run.
  std::vector<RecordedRun> failed = runs_of({1.0}, "c");
  for (Record& r : failed.front().rows) {
    if (r.metric == "wrong" && r.labels.bytes == 8) r.verdict = Verdict::fail;
  }
  EXPECT_EQ(compare_runs(runs_of({1.0}, "b"), failed, {}).regressions, 1u);
}

// With enough runs, each row's detectable change follows its noise: rows whose baseline runs agree
// within +-1% (and iterations +-2%) detect the 5% tolerance and pass; rows with +-20% independent
// noise cannot (about +60% at their false-alarm rate), so unchanged they are blind, never ok, and
// more baseline runs would not help (a single current run's own noise is most of it): the cure is
// interleaving. A slowdown beyond even that noise (3x) is still a regression.
TEST(CompareRuns, ARowThatCannotSeeTheToleranceIsBlind) {
  const Comparison quiet = compare_runs(runs_of({0.99, 1.0, 1.01, 1.0, 0.995, 1.005, 1.0, 0.998}, "b"), runs_of({1.0}, "c"), {});
  EXPECT_EQ(quiet.blind, 0u);
  EXPECT_EQ(quiet.unchanged, 9u);
  EXPECT_EQ(quiet.detect_tolerance, 9u);
  for (const ComparedRow& row : quiet.rows) {
    if (row.direction != Direction::not_judged) {
      EXPECT_LE(row.detectable_percent, 5) << row.label;
    }
  }

  const std::vector<RecordedRun> noisy = family_runs(8, "b", 7, [](size_t) { return 1.0; });
  const Comparison c = compare_runs(noisy, family_runs(1, "c", 11, [](size_t) { return 1.0; }), {});
  EXPECT_EQ(c.regressions, 0u);
  EXPECT_EQ(c.unchanged, 0u);
  EXPECT_EQ(c.blind, 8u * 3);  // time, algbw, busbw at 8 sizes
  EXPECT_EQ(c.detect_larger, 8u * 3);
  for (const ComparedRow& row : c.rows) {
    if (row.direction == Direction::not_judged) continue;
    EXPECT_GT(row.detectable_percent, 25) << row.label;
    EXPECT_EQ(row.cure, Cure::interleave) << row.label;
    EXPECT_NE(row.reason.find("blind: sees only a worsening of +"), std::string::npos) << row.reason;
  }
  const Comparison slowed = compare_runs(noisy, family_runs(1, "c", 11, [](size_t) { return 3.0; }), {});
  EXPECT_EQ(slowed.regressions, 5u * 3);  // the 5 sizes from 64 KiB up
  EXPECT_EQ(slowed.blind, 3u * 3);
}

// Where the row's own spread is small against what more runs can fix: baseline runs within +-2.5%
// and three current repetitions. With 7 baseline runs the row sees only a larger change; the cure
// names the runs that would bring its detectable change to the tolerance, and with that many
// (drawn alike) it is no longer blind.
TEST(CompareRuns, TheCureNamesTheBaselineRunsThatWouldDo) {
  const std::vector<double> spread{1.0, 1.025, 0.975, 1.01, 0.99, 1.02, 0.98};
  const std::vector<RecordedRun> current = runs_of({1.0, 1.01, 0.99}, "c");
  const Comparison c = compare_runs(runs_of(spread, "b"), current, {});
  size_t cured_by_runs = 0, runs = 0;
  for (const ComparedRow& row : c.rows) {
    if (row.outcome != Outcome::blind) continue;
    if (row.cure == Cure::runs) {
      ++cured_by_runs;
      runs = std::max(runs, row.cure_runs);
      EXPECT_GT(row.cure_runs, 7u);
      EXPECT_NE(row.reason.find("cure: " + std::to_string(row.cure_runs) + " baseline runs"), std::string::npos) << row.reason;
    }
  }
  ASSERT_GT(cured_by_runs, 0u);
  std::vector<double> more;
  while (more.size() < runs) more.insert(more.end(), spread.begin(), spread.end());
  more.resize(runs);
  const Comparison cured = compare_runs(runs_of(more, "b"), current, {});
  EXPECT_EQ(cured.blind, 0u);
}

// Repetitions of one run (--repeat) are runs: split_runs separates them by repetition, and the
// median over the current repetitions is judged, so one slow repetition does not fail the gate
// while a row that failed in any repetition does.
TEST(CompareRuns, RepetitionsAreRuns) {
  std::vector<Record> repeated;
  const std::vector<double> scales{1.0, 1.6, 1.01};  // the second repetition hit a busy machine
  for (size_t k = 0; k < scales.size(); ++k) {
    for (Record r : run(scales[k])) {
      r.run_id = "current";
      r.repetition = static_cast<int>(k) + 1;
      repeated.push_back(std::move(r));
    }
  }
  const std::vector<RecordedRun> current = split_runs(repeated, "current.csv");
  ASSERT_EQ(current.size(), 3u);
  EXPECT_EQ(current[1].rows.front().repetition, 2);
  const std::vector<RecordedRun> baseline = runs_of({0.99, 1.0, 1.01}, "b");
  const Comparison c = compare_runs(baseline, current, {});
  EXPECT_EQ(c.regressions, 0u);
  EXPECT_EQ(c.current_runs, 3u);
  // A repetition whose check failed fails the gate, though the first repetition passed.
  for (Record& r : repeated) {
    if (r.repetition == 3 && r.metric == "wrong" && r.case_id == "all_reduce/f32/sum/8") {
      r.verdict = Verdict::fail;
      r.value = 3;
    }
  }
  const Comparison failed = compare_runs(baseline, split_runs(repeated, "current.csv"), {});
  EXPECT_EQ(failed.regressions, 1u);
  EXPECT_EQ(count_runs(failed, "wrong", Outcome::regressed), 1u);
}

// Every run must be of one stack, and each run is held to the rule of one measurement per row.
TEST(CompareRuns, EveryRunIsCheckedAlone) {
  std::vector<RecordedRun> baseline = runs_of({1.0, 1.0}, "b");
  baseline[1].rows.push_back(baseline[1].rows.front());
  try {
    compare_runs(baseline, runs_of({1.0}, "c"), {});
    ADD_FAILURE() << "accepted a run with a row twice";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the baseline run b1 in file1 has the row"), std::string::npos) << e.what();
  }
  std::vector<RecordedRun> other = runs_of({1.0, 1.0}, "b");
  for (Record& r : other[0].rows) r.labels.backend = "ring(mpi)";
  EXPECT_THROW(compare_runs(other, runs_of({1.0}, "c"), {}), Error);
}

// The one line compare_runs refuses `baselines` against `currents` with ("" when it accepts them).
std::string refusal(const std::vector<RecordedRun>& baselines, const std::vector<RecordedRun>& currents) {
  try {
    compare_runs(baselines, currents, {});
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    return e.what();
  }
  return "";
}

// A run is (run_id, repetition), whatever file it comes from. A baseline run given twice (two
// copies in a folder, one file named twice, one run in two files) would count its values twice
// and shrink the spread seen between runs (once, 569 regressions where one copy gave 40): it is
// refused, naming the run, its repetition and both sources.
TEST(CompareRuns, ABaselineRunGivenTwiceIsRefused) {
  const std::vector<RecordedRun> baseline = runs_of({1.0, 1.01, 0.99}, "b"), current = runs_of({1.0}, "c");
  std::vector<RecordedRun> twice = baseline;
  twice.push_back(baseline[1]);
  twice.back().source = "copy.csv";
  EXPECT_EQ(refusal(twice, current), "run b1 (repetition 1) is in file1 and copy.csv: give each baseline run once");
  twice.back().source = "file1";  // the same file named twice
  EXPECT_EQ(refusal(twice, current), "run b1 (repetition 1) is in file1 twice: give each baseline run once");
  // The same run id with another repetition is another run (a pass of `run --repeat`).
  for (Record& r : twice.back().rows) r.repetition = 2;
  EXPECT_EQ(refusal(twice, current), "");
  EXPECT_EQ(compare_runs(twice, current, {}).baseline_runs, 4u);
  // A repetition other than the first is named as such.
  std::vector<RecordedRun> repeated = twice;
  repeated.push_back(twice.back());
  repeated.back().source = "again.csv";
  EXPECT_EQ(refusal(repeated, current), "run b1 (repetition 2) is in file1 and again.csv: give each baseline run once");
}

// The current run among the baselines (a baseline folder that holds the current file, or a copy
// of it) would be judged against itself: refused. The current file's repetitions are runs of one
// run id; the baselines may hold none of them.
TEST(CompareRuns, TheCurrentRunAmongTheBaselinesIsRefused) {
  const std::vector<RecordedRun> baseline = runs_of({1.0, 1.01, 0.99}, "b");
  RecordedRun current = baseline[2];
  current.source = "current.csv";
  EXPECT_EQ(refusal(baseline, {current}),
            "the current run b2 (repetition 1) in current.csv is also among the baselines (in file2): a run cannot "
            "be its own baseline");
  // Three repetitions of one current run: accepted while no baseline is one of them.
  const std::vector<RecordedRun> one = runs_of({1.0}, "c");
  std::vector<Record> repeated;
  for (int k = 1; k <= 3; ++k) {
    for (Record r : one.front().rows) {
      r.repetition = k;
      repeated.push_back(std::move(r));
    }
  }
  const std::vector<RecordedRun> currents = split_runs(repeated, "current.csv");
  ASSERT_EQ(currents.size(), 3u);
  EXPECT_EQ(refusal(baseline, currents), "");
  std::vector<RecordedRun> with_one = baseline;
  with_one.push_back(currents[1]);
  with_one.back().source = "old.csv";
  EXPECT_EQ(refusal(with_one, currents),
            "the current run c0 (repetition 2) in current.csv is also among the baselines (in old.csv): a run cannot "
            "be its own baseline");
}

// `compare a.csv a.csv` judges a run against itself: "no regression" would say nothing. Refused,
// saying so, whether the files are one or a copy.
TEST(CompareRuns, ARunAgainstItselfIsRefusedSayingSo) {
  const std::vector<RecordedRun> a = split_runs(run(), "a.csv");
  EXPECT_EQ(refusal(a, a),
            "the baseline and the current run are the same run (run run, repetition 1, in a.csv): a run cannot be its "
            "own baseline");
  EXPECT_EQ(refusal(a, split_runs(run(1.2), "copy.csv")),
            "the baseline and the current run are the same run (run run, repetition 1, in a.csv and copy.csv): a run "
            "cannot be its own baseline");
  // The same through the overload for one run a side.
  try {
    compare_runs(run(), run(), {});
    ADD_FAILURE() << "judged a run against itself";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the baseline and the current run are the same run (run run, repetition 1)"),
              std::string::npos)
        << e.what();
  }
}

// release_unread lets go of what the gate does not read, and no outcome, number or reason of the
// comparison changes: with the per-iteration samples (--samples) and without, with the family
// sets and the between-run rows judged. The text of the earlier baseline runs is freed (a
// string's capacity back to its in-place buffer, a vector's to 0), the most recent one's kept.
TEST(CompareRuns, ReleasingWhatIsNotReadChangesNoVerdict) {
  const std::string long_text(200, 'x');  // past any in-place string buffer
  std::vector<RecordedRun> baseline = family_runs(6, "b", 7, [](size_t) { return 1.0; });
  for (RecordedRun& run : baseline) {
    for (Record& r : run.rows) {
      r.timestamp = r.labels.host = r.labels.backend_version = r.labels.mpi_version = r.detail = r.seed = long_text;
    }
  }
  const std::vector<RecordedRun> current = family_runs(2, "c", 11, [](size_t) { return 1.25; });
  for (const bool use_samples : {false, true}) {
    CompareSettings settings = from_runs(6);
    settings.use_samples = use_samples;
    const Comparison whole = compare_runs(baseline, current, settings);
    ASSERT_GT(whole.regressions, 0u);
    ASSERT_GT(whole.family_tests, 0u);
    std::vector<RecordedRun> released = baseline, released_current = current;
    for (size_t k = 0; k < released.size(); ++k) release_unread(released[k], k + 1 < released.size(), use_samples);
    for (RecordedRun& run : released_current) release_unread(run, false, use_samples);
    const Comparison trimmed = compare_runs(released, released_current, settings);
    ASSERT_EQ(trimmed.rows.size(), whole.rows.size());
    EXPECT_EQ(trimmed.regressions, whole.regressions);
    for (size_t i = 0; i < whole.rows.size(); ++i) {
      const ComparedRow &a = whole.rows[i], &b = trimmed.rows[i];
      EXPECT_EQ(a.outcome, b.outcome) << a.label;
      EXPECT_EQ(a.reason, b.reason) << a.label;
      EXPECT_EQ(a.baseline.value, b.baseline.value) << a.label;
      EXPECT_EQ(a.current.value, b.current.value) << a.label;
    }
    const Record& earlier = released.front().rows.front();
    EXPECT_EQ(earlier.samples.capacity(), 0u);
    EXPECT_LT(earlier.labels.mpi_version.capacity(), long_text.size());
    EXPECT_LT(earlier.detail.capacity(), long_text.size());
    const Record& latest = released.back().rows.front();  // the time row of the first size
    EXPECT_EQ(latest.detail, long_text);
    EXPECT_EQ(latest.labels.mpi_version, long_text);
    EXPECT_EQ(latest.samples.empty(), !use_samples);
  }
}

}  // namespace
}  // namespace dts

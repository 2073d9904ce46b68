// compare_runs, the verdicts: the row join, the direction of each metric, and the noise rules
// applied (p05/p95 intervals and the Mann–Whitney U test within runs; the between-run noise of
// noise.h across runs). The rules are argued where they are applied. The runs and their stacks
// are runs.cpp's, the U test mann_whitney.cpp's.
#include "results/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "core/error.h"
#include "results/noise.h"

namespace dts {

namespace {





std::string case_key(const Record& r) { return r.suite + '\x1f' + r.case_id; }


std::string percent(double fraction) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3g%%", fraction * 100);
  return buffer;
}

// Noise judged from the two runs' distributions. Returns whether the change is outside the noise
// in the direction `worse` (true: towards worse), and says why in `reason`.
//
// p05/p95 rule, when no samples decide: the change is outside the noise when the runs' p05..p95
// intervals do not overlap on the side of the change — for a slowdown, the current run's p05 lies
// above the baseline's p95: 95% of current iterations were slower than 95% of baseline ones, a
// shift larger than the spread of either run. If nothing changed, both runs draw from one
// distribution and such a separation is rare: with the quick suite's 5 iterations a side p05 and
// p95 sit within a fifth of the way from the extreme samples, so it takes (nearly) every current
// sample above every baseline sample, probability about 1/C(10,5) = 0.4% per row; with more
// iterations the middle 90% of two samples of one distribution are disjoint with a probability
// that falls exponentially in n. The rule is conservative by design: a false alarm in a CI gate
// costs more trust than a slowdown smaller than the run-to-run spread, which this gate cannot see
// anyway. Rows without a distribution (memory, single values) are deterministic or have no noise
// estimate: the tolerance alone decides.
bool outside_intervals(const Record& b, const Record& c, Direction direction, bool worse, std::string& reason) {
  if (b.stats.n == 0 || c.stats.n == 0) {
    reason = "no distribution: the tolerance decides";
    return true;
  }
  // Lower is better and worse, or higher is better and better: the current run moved up.
  const bool current_moved_up = (direction == Direction::lower_is_better) == worse;
  if (current_moved_up) {
    const bool separated = c.stats.p05 > b.stats.p95;
    reason = "p05 " + format_number(c.stats.p05) + (separated ? " > " : " <= ") + "baseline p95 " +
             format_number(b.stats.p95) + (separated ? "" : ": inside the noise");
    return separated;
  }
  const bool separated = c.stats.p95 < b.stats.p05;
  reason = "p95 " + format_number(c.stats.p95) + (separated ? " < " : " >= ") + "baseline p05 " +
           format_number(b.stats.p05) + (separated ? "" : ": inside the noise");
  return separated;
}

}  // namespace

Direction direction_of(const Record& r) {
  if (r.unit == "seconds") return Direction::lower_is_better;
  if (r.unit == "bytes_per_second") return Direction::higher_is_better;
  if (r.metric == "scaling_efficiency" || r.metric == "throughput") return Direction::higher_is_better;
  if (r.metric.rfind("memory_", 0) == 0 && r.unit == "bytes") return Direction::lower_is_better;
  return Direction::not_judged;
}

std::string_view name(Outcome outcome) {
  switch (outcome) {
    case Outcome::unchanged: return "ok";
    case Outcome::improved: return "improved";
    case Outcome::regressed: return "REGRESSED";
    case Outcome::not_judged: return "-";
    case Outcome::missing: return "MISSING";
    case Outcome::blind: return "blind";
  }
  return "?";
}

namespace {

// A run measures each thing once: two rows with the same join key in one file (runs pasted
// together, a hand edit) would be joined with the other file's rows in an arbitrary pairing, so the
// file is refused, naming the row.
void refuse_repeated_rows(const std::vector<Record>& rows, const std::string& which) {
  std::set<std::string> keys;
  for (const Record& r : rows) {
    if (keys.insert(join_key(r)).second) continue;
    std::string what = r.suite + " " + r.case_id + " " + r.metric;
    if (!r.labels.placement.empty()) what += " " + r.labels.placement;
    if (!r.labels.config.empty()) what += " [" + r.labels.config + "]";
    throw Error(Error::Kind::invalid_argument, which + " has the row " + what +
                                                   " more than once; a results file holds each measurement once "
                                                   "(runs pasted together?)");
  }
}


// The values of one row over the runs of each side, for the between-run judgement.
struct RunValues {
  std::vector<double> baseline, current;  // the row's value in each run that has it
  std::vector<double> floors;             // each baseline run's own noise in its median (log variance)
  std::set<std::string> baseline_ids;     // the baseline runs (run ids) that have the row
  const Record* failed_current = nullptr; // a current run in which the row failed, if any
};

// A set of rows of one family found worse, together, than the between-run noise allows.
struct FamilyFlag {
  double p = 1;
  std::string reason;
};

struct BetweenRuns {
  std::map<std::string, RunValues> by_key;  // join key -> values
  std::map<std::string, RowNoise> noise;    // join key -> its spread, for the keys judged by it
  std::map<std::string, NoisePrior> prior;  // join key -> the pool of its like rows
  std::map<std::string, FamilyFlag> family; // join key -> the most significant flagged set it is in
  double row_alpha = 0;
};

bool positive_finite(const std::vector<double>& values) {
  return std::all_of(values.begin(), values.end(), [](double v) { return v > 0 && std::isfinite(v); });
}

// Rows alike in noise: one suite, metric, unit and operation, and sizes within one factor-of-8
// band. The operation: measured here (Open MPI 4.1, 2 ranks), one run's all_reduce and
// reduce_scatter rows moved together by 2-5x from run to run while its all_gather rows stayed
// within 10-20%, so a pool across operations lent a quiet collective the noise of a noisy one.
// The band: a 4 B latency and a 64 MiB bandwidth differ in noise too.
std::string noise_group(const Record& r, bool with_size) {
  std::string group = r.suite + '\x1f' + r.metric + '\x1f' + r.unit + '\x1f' + r.labels.op;
  if (with_size) {
    const int band = r.labels.bytes > 0 ? static_cast<int>(std::floor(std::log2(static_cast<double>(r.labels.bytes)) / 3)) : -1;
    group += '\x1f' + std::to_string(band);
  }
  return group;
}

// A family: the rows of one measurement that differ only in message size (a collective's sweep:
// suite, metric, operation, dtype, placement, strategy, world size, and the config without the
// element count).
std::string family_key(const Record& r) {
  return r.suite + '\x1f' + r.metric + '\x1f' + r.unit + '\x1f' + r.labels.op + '\x1f' + r.labels.dtype + '\x1f' +
         r.labels.placement + '\x1f' + r.labels.strategy + '\x1f' + std::to_string(r.labels.world_size) + '\x1f' +
         config_without(r.labels.config, "count");
}

std::string size_text(int64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  size_t unit = 0;
  while (unit + 1 < std::size(kUnits) && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++unit;
  }
  return std::to_string(bytes) + " " + kUnits[unit];
}

// Rows whose values vary from run to run and need a noise model to be judged: every judged
// metric but memory, which the strategies compute from their layouts (a byte count, the same in
// every run of one plan).
bool varies(const Record& r) { return direction_of(r) != Direction::not_judged && r.metric.rfind("memory_", 0) != 0; }

// What would bring a row's detectable change down to the tolerance, from its between-run noise:
// `factor` is (t_{1-alpha} + t_{power}) in standard deviations of the log, `sd` the moderated
// spread, `floor_share` the part of its variance that the runs' own iterations account for.
// `needed`: the tolerance in log units, towards worse.
void choose_cure(ComparedRow& row, double needed, double factor, double sd, double floor_share) {
  const double r = static_cast<double>(std::max<size_t>(row.current_runs, 1));
  for (size_t k = row.baseline_runs + 1; k <= 1000; ++k) {
    if (factor * sd * std::sqrt(1 / static_cast<double>(k) + 1 / r) <= needed) {
      row.cure = Cure::runs;
      row.cure_runs = k;
      return;
    }
  }
  row.cure = floor_share >= 0.5 ? Cure::iterations : Cure::interleave;
}

std::string cure_text(const ComparedRow& row) {
  switch (row.cure) {
    case Cure::runs: return std::to_string(row.cure_runs) + " baseline runs";
    case Cure::iterations: return "more iterations per run (-n)";
    case Cure::interleave: return "interleaved A/B runs (the runs differ by more than the tolerance)";
    case Cure::none: break;
  }
  return "";
}

Comparison compare_core(const std::vector<Record>& baseline, const std::vector<Record>& current,
                        const CompareSettings& settings, const BetweenRuns* between, size_t min_runs) {

  std::set<std::string> current_cases, baseline_cases, baseline_failed_cases;
  for (const Record& r : current) current_cases.insert(case_key(r));
  for (const Record& r : baseline) baseline_cases.insert(case_key(r));
  size_t missing_cases = 0;
  std::string first_missing;
  std::set<std::string> counted;
  for (const Record& r : baseline) {
    if (is_failure(r.verdict)) baseline_failed_cases.insert(case_key(r));
    if (current_cases.count(case_key(r)) || !counted.insert(case_key(r)).second) continue;
    if (missing_cases++ == 0) first_missing = r.suite + " " + r.case_id;
  }
  if (missing_cases > 0) {
    throw Error(Error::Kind::invalid_argument,
                std::to_string(missing_cases) + " case(s) of the baseline are missing from the current run (first: " +
                    first_missing + "); run the same suites and sweep as the baseline");
  }

  // The join: the k-th row of a key in the baseline with the k-th of the same key in the current run.
  std::map<std::string, std::vector<size_t>> current_by_key;
  for (size_t i = 0; i < current.size(); ++i) current_by_key[join_key(current[i])].push_back(i);
  std::vector<size_t> match(baseline.size(), SIZE_MAX);
  std::vector<bool> matched(current.size(), false);
  std::map<std::string, size_t> seen;
  std::map<std::string, size_t> label_uses;
  for (size_t i = 0; i < baseline.size(); ++i) {
    const std::string key = join_key(baseline[i]);
    const size_t occurrence = seen[key]++;
    const auto it = current_by_key.find(key);
    if (it != current_by_key.end() && occurrence < it->second.size()) {
      match[i] = it->second[occurrence];
      matched[match[i]] = true;
    }
    const Record& b = baseline[i];
    ++label_uses[b.suite + '\x1f' + b.case_id + '\x1f' + b.labels.placement + '\x1f' + b.metric];
  }
  // Cases that ran in the baseline and no longer run (a skip, fail or timeout `check` row of their
  // own): that one row carries the regression, in place of each measurement it lost.
  std::set<std::string> not_run_now;
  for (size_t i = 0; i < current.size(); ++i) {
    const Record& c = current[i];
    if (!matched[i] && c.metric == "check" && (c.verdict == Verdict::skip || is_failure(c.verdict))) {
      not_run_now.insert(case_key(c));
    }
  }
  const auto label_of = [&](const Record& r) {
    std::string label = r.case_id;
    if (!r.labels.placement.empty()) label += " " + r.labels.placement;
    const auto uses = label_uses.find(r.suite + '\x1f' + r.case_id + '\x1f' + r.labels.placement + '\x1f' + r.metric);
    if (uses != label_uses.end() && uses->second > 1 && !r.labels.config.empty()) label += " " + r.labels.config;
    return label;
  };

  // Per-iteration samples of a row, or of its sibling `time` row for a bandwidth: bandwidth is
  // bytes * factor / time with the same constant in both runs, a monotone map, so the rank-based U
  // test gives the same answer on times (with the direction turned).
  std::map<std::string, size_t> baseline_by_key;
  for (size_t i = 0; i < baseline.size(); ++i) baseline_by_key.emplace(join_key(baseline[i]), i);
  const auto time_sibling = [&](const Record& b, bool in_current) -> const Record* {
    const std::string key = join_key(b, "time");
    if (in_current) {
      const auto it = current_by_key.find(key);
      return it == current_by_key.end() ? nullptr : &current[it->second.front()];
    }
    const auto it = baseline_by_key.find(key);
    return it == baseline_by_key.end() ? nullptr : &baseline[it->second];
  };

  Comparison result;
  result.min_runs = min_runs;
  const auto add = [&](ComparedRow row) {
    // A row that could not have seen a change of the tolerance is not shown to be unchanged.
    if (row.outcome == Outcome::unchanged && row.detectable_percent > settings.tolerance * 100) {
      row.outcome = Outcome::blind;
      row.reason = (std::isinf(row.detectable_percent) ? std::string("blind: ")
                                                        : "blind: sees only a worsening of " +
                                                              signed_percent(row.detectable_percent / 100) + " or more (tolerance " +
                                                              percent(settings.tolerance) + "): ") +
                   row.reason + "; cure: " + cure_text(row);
    }
    if (!std::isnan(row.detectable_percent)) {
      if (std::isinf(row.detectable_percent)) {
        ++result.detect_nothing;
      } else if (row.detectable_percent <= settings.tolerance * 100) {
        ++result.detect_tolerance;
      } else {
        ++result.detect_larger;
      }
    }
    switch (row.outcome) {
      case Outcome::blind: ++result.blind; break;
      case Outcome::regressed:
      case Outcome::missing: ++result.regressions; break;
      case Outcome::improved: ++result.improvements; break;
      case Outcome::unchanged: ++result.unchanged; break;
      case Outcome::not_judged: ++result.not_judged; break;
    }
    result.rows.push_back(std::move(row));
  };

  // Below the least number of baseline runs, a value that varies from run to run gets no verdict
  // of its own (min_baseline_runs: a state no baseline run showed would fail an unchanged stack
  // more often than the false-alarm rate).
  // Runs are counted by run id, per row: the passes of one `--repeat` run share its machine state.
  const auto refuse_timing = [&](ComparedRow& row, size_t runs) {
    row.outcome = Outcome::unchanged;  // add() makes it blind
    row.detectable_percent = std::numeric_limits<double>::infinity();
    row.cure = Cure::runs;
    row.cure_runs = min_runs;
    row.reason = "no timing verdict from " + std::to_string(runs) + " baseline run" + (runs == 1 ? "" : "s") +
                 " with this row, fewer than the " + std::to_string(min_runs) + " a " + percent(settings.false_alarm) +
                 " false-alarm rate needs";
  };

  for (size_t i = 0; i < baseline.size(); ++i) {
    const Record& b = baseline[i];
    ComparedRow row;
    row.baseline = b;
    row.label = label_of(b);
    row.direction = direction_of(b);
    row.change_percent = std::nan("");
    row.p_value = std::nan("");
    if (match[i] == SIZE_MAX) {
      if (not_run_now.count(case_key(b))) continue;  // the case's check row speaks for it
      if (b.metric == "check" && (b.verdict == Verdict::skip || is_failure(b.verdict))) {
        // The case did not run in the baseline and runs now (its check row is gone because it
        // has measurements instead): support was added, or a failure fixed.
        row.outcome = b.verdict == Verdict::skip ? Outcome::not_judged : Outcome::improved;
        row.reason = std::string(name(b.verdict)) + " in the baseline, runs now";
        add(std::move(row));
        continue;
      }
      row.outcome = Outcome::missing;
      row.reason = "row missing from the current run";
      add(std::move(row));
      continue;
    }
    const std::string key = join_key(b);
    const RunValues* values = nullptr;
    if (between) {
      const auto it = between->by_key.find(key);
      if (it != between->by_key.end()) values = &it->second;
    }
    // A row that failed in any current run (a repetition) stands for the current run's verdict.
    const Record& c = values && values->failed_current && !is_failure(current[match[i]].verdict) ? *values->failed_current
                                                                                                  : current[match[i]];
    row.current = c;
    if (b.value != 0 && std::isfinite(b.value) && std::isfinite(c.value)) {
      row.change_percent = (c.value - b.value) / std::fabs(b.value) * 100;
    }
    // A verdict that turns to fail or timeout is a regression whatever the numbers say.
    if (is_failure(c.verdict) && !is_failure(b.verdict)) {
      row.outcome = Outcome::regressed;
      row.reason = "verdict " + std::string(name(b.verdict)) + " -> " + std::string(name(c.verdict));
      if (!c.detail.empty()) row.reason += ": " + c.detail;
      add(std::move(row));
      continue;
    }
    if (is_failure(b.verdict) && !is_failure(c.verdict)) {
      row.outcome = Outcome::improved;
      row.reason = "verdict " + std::string(name(b.verdict)) + " -> " + std::string(name(c.verdict));
      add(std::move(row));
      continue;
    }
    if (row.direction == Direction::not_judged) {
      row.outcome = Outcome::not_judged;
      add(std::move(row));
      continue;
    }
    if (between && between->noise.count(key)) {
      // Between-run noise: the medians over the runs, judged against the spread of the baseline
      // runs (results/noise.h).
      const RowNoise& noise = between->noise.at(key);
      const NoisePrior& prior = between->prior.at(key);
      row.baseline_runs = values->baseline.size();
      row.current_runs = values->current.size();
      row.baseline.value = median_of(values->baseline);
      row.current.value = median_of(values->current);
      row.change_percent = (row.current.value - row.baseline.value) / row.baseline.value * 100;
      const double worse_by = (row.direction == Direction::lower_is_better ? 1 : -1) * row.change_percent / 100;
      const bool worse_is_up = row.direction == Direction::lower_is_better;
      const NoiseJudgement towards_worse =
          judge_between_runs(values->baseline, values->current, worse_is_up, noise, prior, between->row_alpha);
      row.allowed_percent = towards_worse.limit * 100;
      const std::string runs = std::to_string(row.baseline_runs) + " baseline run" + (row.baseline_runs > 1 ? "s" : "");
      if (varies(b) && values->baseline_ids.size() < min_runs) {
        refuse_timing(row, values->baseline_ids.size());
        add(std::move(row));
        continue;
      }
      // On the tolerance's scale: a time's rise, a bandwidth's drop (the log change x towards
      // worse is a rise of e^x - 1, a drop of 1 - e^-x).
      const double detectable_log = std::log1p(towards_worse.detectable);
      row.detectable_percent = (worse_is_up ? std::expm1(detectable_log) : -std::expm1(-detectable_log)) * 100;
      const double tolerance_log = worse_is_up ? std::log1p(settings.tolerance)
                                   : settings.tolerance < 1 ? -std::log1p(-settings.tolerance)
                                                            : std::numeric_limits<double>::infinity();
      if (detectable_log > tolerance_log) {
        const double se_factor = std::sqrt(1 / static_cast<double>(row.baseline_runs) + 1 / static_cast<double>(row.current_runs));
        const double sd = towards_worse.sd;
        const double factor = sd > 0 ? detectable_log / (sd * se_factor) : 0;
        choose_cure(row, tolerance_log, factor, sd, sd > 0 ? noise.floor / (sd * sd) : 0);
      }
      if (std::fabs(worse_by) <= settings.tolerance) {
        row.outcome = Outcome::unchanged;
        row.reason = "within the tolerance (" + percent(settings.tolerance) + ")";
        add(std::move(row));
        continue;
      }
      const NoiseJudgement judged =
          worse_by > 0 ? towards_worse
                       : judge_between_runs(values->baseline, values->current, !worse_is_up, noise, prior, between->row_alpha);
      row.p_value = judged.p;
      const std::string noise_text = "sd " + percent(judged.sd) + " over " + runs + ", " + format_number(judged.df, "%g") +
                                     " df with like rows";
      const auto family = between->family.find(key);
      if (judged.outside) {
        row.outcome = worse_by > 0 ? Outcome::regressed : Outcome::improved;
        row.reason = signed_percent(worse_by > 0 ? judged.change : -judged.change) + " " + (worse_by > 0 ? "worse" : "better") +
                     ", beyond the " + signed_percent(judged.limit) + " the between-run noise allows (" + noise_text +
                     "; p " + format_number(judged.p) + " < " + format_number(between->row_alpha) + ")";
      } else if (worse_by > 0 && family != between->family.end()) {
        // Inside its own noise, but one of a set of its family's rows that moved together.
        row.outcome = Outcome::regressed;
        row.p_value = family->second.p;
        row.reason = signed_percent(judged.change) + " worse, with its family: " + family->second.reason;
      } else {
        row.outcome = Outcome::unchanged;
        row.reason = "inside the between-run noise: up to " + signed_percent(judged.limit) + " (" + noise_text + "; p " +
                     format_number(judged.p) + ")";
      }
      add(std::move(row));
      continue;
    }
    if (std::isfinite(b.value) && !std::isfinite(c.value)) {
      // A measurement that stopped being a number (a NaN time, an infinite bandwidth from a zero
      // time) is broken, not faster.
      row.outcome = Outcome::regressed;
      row.reason = "value " + format_number(b.value) + " -> " + format_number(c.value);
      add(std::move(row));
      continue;
    }
    if (b.value == 0 && c.value == 0) {
      // Nothing moved (a bandwidth of 0 bytes): no relative change, no noise to know.
      row.outcome = Outcome::unchanged;
      row.reason = "0 in both runs";
      add(std::move(row));
      continue;
    }
    if (varies(b) && min_runs > 1) {
      refuse_timing(row, values ? std::max<size_t>(values->baseline_ids.size(), 1) : 1);
      add(std::move(row));
      continue;
    }
    // The within-run rules (min_runs 1): what they can see is the baseline's own spread, p05..p95
    // (a shift that clears it), and nothing of how runs differ; without a distribution, the
    // tolerance alone decides.
    if (b.stats.n > 0 && b.stats.p05 > 0 && b.stats.p95 >= b.stats.p05) {
      const double width = row.direction == Direction::lower_is_better ? b.stats.p95 / b.stats.p05 - 1 : 1 - b.stats.p05 / b.stats.p95;
      row.detectable_percent = width * 100;
      row.cure = Cure::iterations;
    } else if (b.stats.n == 0) {
      row.detectable_percent = 0;
    }
    if (b.value == 0 && std::isfinite(c.value)) {
      // No relative change exists from 0: only the noise can judge (a zero baseline with zero
      // spread makes any move in the worse direction a regression).
      if (c.value == 0) {
        row.outcome = Outcome::unchanged;
        row.reason = "0 in both runs";
      } else {
        const bool worse = (row.direction == Direction::lower_is_better) == (c.value > 0);
        const bool outside = outside_intervals(b, c, row.direction, worse, row.reason);
        row.outcome = !outside ? Outcome::unchanged : (worse ? Outcome::regressed : Outcome::improved);
        row.reason = "from a baseline of 0: " + row.reason;
      }
      add(std::move(row));
      continue;
    }
    if (std::isnan(row.change_percent)) {
      row.outcome = Outcome::not_judged;
      row.reason = "baseline value " + format_number(b.value) + " gives no relative change";
      add(std::move(row));
      continue;
    }
    // Positive: worse by that fraction of the baseline.
    const double worse_by = (row.direction == Direction::lower_is_better ? 1 : -1) * row.change_percent / 100;
    if (std::fabs(worse_by) <= settings.tolerance) {
      row.outcome = Outcome::unchanged;
      row.reason = "within the tolerance (" + percent(settings.tolerance) + ")";
      add(std::move(row));
      continue;
    }
    const bool worse = worse_by > 0;
    bool outside = false, decided = false;
    std::string note;
    if (settings.use_samples) {
      // The samples to test, and the direction they are tested in.
      const Record* bs = &b;
      const Record* cs = &c;
      Direction direction = row.direction;
      if (b.samples.empty() && b.unit == "bytes_per_second") {
        bs = time_sibling(b, false);
        cs = time_sibling(b, true);
        direction = Direction::lower_is_better;
      }
      if (bs && cs && !bs->samples.empty() && !cs->samples.empty()) {
        if (mann_whitney_smallest_p(bs->samples.size(), cs->samples.size()) >= settings.alpha) {
          note = "too few samples for the U test; ";
        } else {
          // Test "current moved up" when a slower time or (for higher-is-better) a better value.
          const bool current_up = (direction == Direction::lower_is_better) == worse;
          row.p_value = current_up ? mann_whitney_p_greater(cs->samples, bs->samples)
                                   : mann_whitney_p_greater(bs->samples, cs->samples);
          outside = row.p_value < settings.alpha;
          decided = true;
          row.reason = "U test p = " + format_number(row.p_value) + (outside ? " < " : " >= ") +
                       format_number(settings.alpha) + (outside ? "" : ": inside the noise");
        }
      } else {
        note = "no samples; ";
      }
    }
    if (!decided) {
      outside = outside_intervals(b, c, row.direction, worse, row.reason);
      row.reason = note + row.reason;
    }
    row.outcome = !outside ? Outcome::unchanged : (worse ? Outcome::regressed : Outcome::improved);
    add(std::move(row));
  }

  for (size_t i = 0; i < current.size(); ++i) {
    if (matched[i]) continue;
    const Record& c = current[i];
    const bool no_longer_runs = c.metric == "check" && not_run_now.count(case_key(c)) &&
                                baseline_cases.count(case_key(c)) &&
                                !baseline_failed_cases.count(case_key(c)) && c.verdict == Verdict::skip;
    if ((is_failure(c.verdict) && !baseline_failed_cases.count(case_key(c))) || no_longer_runs) {
      ComparedRow row;
      row.current = c;
      row.label = label_of(c);
      row.change_percent = std::nan("");
      row.p_value = std::nan("");
      row.outcome = Outcome::regressed;
      row.reason = (no_longer_runs ? "ran in the baseline, now " : "new ") + std::string(name(c.verdict));
      if (!c.detail.empty()) row.reason += ": " + c.detail;
      add(std::move(row));
    } else {
      ++result.only_in_current;
    }
  }
  return result;
}

}  // namespace

Comparison compare_runs(const std::vector<Record>& baseline, const std::vector<Record>& current,
                        const CompareSettings& settings) {
  return compare_runs(std::vector<RecordedRun>{{"", baseline}}, std::vector<RecordedRun>{{"", current}}, settings);
}

Comparison compare_runs(const std::vector<RecordedRun>& baselines, const std::vector<RecordedRun>& currents,
                        const CompareSettings& settings) {
  if (baselines.empty() || currents.empty()) throw Error(Error::Kind::invalid_argument, "compare needs a baseline and a current run");
  check_distinct_runs(baselines, currents);
  const auto which = [](const char* side, const std::vector<RecordedRun>& runs, const RecordedRun& run) {
    std::string text = side;
    if (runs.size() > 1) {
      text += " run " + (run.rows.empty() ? std::string() : run.rows.front().run_id);
      if (!run.rows.empty() && run.rows.front().repetition > 1) text += " (repetition " + std::to_string(run.rows.front().repetition) + ")";
      if (!run.source.empty()) text += " in " + run.source;
    }
    return text;
  };
  for (const RecordedRun& run : baselines) refuse_repeated_rows(run.rows, which("the baseline", baselines, run));
  for (const RecordedRun& run : currents) refuse_repeated_rows(run.rows, which("the current run", currents, run));
  check_same_stack(baselines, currents);
  const std::vector<Record>& reference_baseline = baselines.back().rows;  // the most recent
  const std::vector<Record>& reference_current = currents.front().rows;

  BetweenRuns between;
  for (const RecordedRun& run : baselines) {
    for (const Record& r : run.rows) {
      if (is_failure(r.verdict) || !std::isfinite(r.value)) continue;
      RunValues& v = between.by_key[join_key(r)];
      v.baseline.push_back(r.value);
      v.floors.push_back(median_log_variance(r.stats.p05, r.stats.p95, static_cast<long>(r.stats.n)));
      v.baseline_ids.insert(r.run_id);
    }
  }
  for (const RecordedRun& run : currents) {
    for (const Record& r : run.rows) {
      RunValues& v = between.by_key[join_key(r)];
      if (is_failure(r.verdict)) {
        if (!v.failed_current) v.failed_current = &r;
      } else if (std::isfinite(r.value)) {
        v.current.push_back(r.value);
      }
    }
  }
  // The rows judged against the between-run noise: a direction, and a positive value in two or
  // more baseline runs and in a current one. Their spreads, pooled by like rows.
  std::map<std::string, std::vector<RowNoise>> by_group, by_wide_group;
  std::vector<std::pair<std::string, const Record*>> judged;
  std::set<std::string> current_keys;
  for (const Record& r : reference_current) current_keys.insert(join_key(r));
  for (const Record& r : reference_baseline) {
    const std::string key = join_key(r);
    const auto it = between.by_key.find(key);
    if (it == between.by_key.end() || direction_of(r) == Direction::not_judged || !current_keys.count(key)) continue;
    const RunValues& v = it->second;
    if (v.baseline.size() < 2 || v.current.empty() || !positive_finite(v.baseline) || !positive_finite(v.current)) continue;
    std::vector<double> floors;
    for (double f : v.floors) {
      if (f > 0) floors.push_back(f);
    }
    const RowNoise noise = row_noise(v.baseline, floors);
    between.noise[key] = noise;
    by_group[noise_group(r, true)].push_back(noise);
    by_wide_group[noise_group(r, false)].push_back(noise);
    judged.emplace_back(key, &r);
  }
  for (const auto& [key, r] : judged) {
    NoisePrior prior = pool_noise(by_group[noise_group(*r, true)]);
    if (prior.df == 0) prior = pool_noise(by_wide_group[noise_group(*r, false)]);
    between.prior[key] = prior;
  }
  // A bandwidth computed from a time row that is judged too (bytes / time, the same run's same
  // samples) is no measurement of its own: it adds no chance of a false alarm.
  const auto derived = [&](const Record& r) { return r.unit == "bytes_per_second" && between.noise.count(join_key(r, "time")); };
  size_t measurements = 0;
  for (const auto& [key, r] : judged) measurements += derived(*r) ? 0 : 1;

  // Families (family_key): a change that moves many sizes of one collective by less than each
  // row's noise allows is still plain in their mean, when the rows' noise is their own. Each run's
  // mean log over a set of the family's rows is judged as a row is, against the same means of the
  // baseline runs (their spread holds what the rows share in a run: a machine state that slows a
  // whole collective). The sets: every size, from each size up (a bandwidth regression), up to
  // each size (a latency one), two sizes at least.
  struct Member {
    int64_t bytes;
    std::string key;
  };
  std::map<std::string, std::vector<Member>> families;
  std::map<std::string, const Record*> family_first;
  for (const auto& [key, r] : judged) {
    if (r->labels.bytes < 0) continue;
    families[family_key(*r)].push_back({r->labels.bytes, key});
    family_first.emplace(family_key(*r), r);
  }
  struct RowSet {
    std::string family;
    std::vector<std::string> keys;
    std::string sizes;
    const Record* first;
    std::vector<size_t> indices;  // the keys' places in each run's logs
  };
  std::vector<RowSet> sets;
  size_t family_tests = 0;
  for (auto& [family, members] : families) {
    std::sort(members.begin(), members.end(), [](const Member& a, const Member& b) { return a.bytes < b.bytes; });
    std::vector<int64_t> sizes;
    for (const Member& m : members) {
      if (sizes.empty() || sizes.back() != m.bytes) sizes.push_back(m.bytes);
    }
    if (sizes.size() < 2) continue;
    const Record* first = family_first.at(family);
    const auto add_set = [&](int64_t lo, int64_t hi, std::string text) {
      RowSet set{family, {}, std::move(text), first, {}};
      for (const Member& m : members) {
        if (m.bytes >= lo && m.bytes <= hi) set.keys.push_back(m.key);
      }
      sets.push_back(std::move(set));
      family_tests += derived(*first) ? 0 : 1;
    };
    for (size_t i = 0; i + 1 < sizes.size(); ++i) {
      add_set(sizes[i], sizes.back(), i == 0 ? "at every size" : "from " + size_text(sizes[i]) + " up");
    }
    for (size_t i = 1; i + 1 < sizes.size(); ++i) add_set(sizes.front(), sizes[i], "up to " + size_text(sizes[i]));
  }
  // Each run's log values of the rows in a set, by the row's place in `set_keys` (NaN: the run
  // has no usable value): a number per row and run, where a map by join key per run would hold
  // the keys once more for every run of a long history.
  std::map<std::string, size_t> set_keys;
  for (RowSet& set : sets) {
    for (const std::string& key : set.keys) set.indices.push_back(set_keys.try_emplace(key, set_keys.size()).first->second);
  }
  const auto logs_of = [&](const RecordedRun& run) {
    std::vector<double> logs(set_keys.size(), std::numeric_limits<double>::quiet_NaN());
    for (const Record& r : run.rows) {
      if (is_failure(r.verdict) || !(r.value > 0) || !std::isfinite(r.value)) continue;
      const auto it = set_keys.find(join_key(r));
      if (it != set_keys.end()) logs[it->second] = std::log(r.value);
    }
    return logs;
  };
  std::vector<std::vector<double>> baseline_logs, current_logs;
  if (!sets.empty()) {
    for (const RecordedRun& run : baselines) baseline_logs.push_back(logs_of(run));
    for (const RecordedRun& run : currents) current_logs.push_back(logs_of(run));
  }
  // The false-alarm rate: shared by the measurements and the family sets judged (Bonferroni),
  // half to each when there are both.
  const double row_share = family_tests > 0 && measurements > 0 ? 0.5 : 1;
  between.row_alpha = measurements == 0 ? 0 : settings.false_alarm * row_share / static_cast<double>(measurements);
  const double family_alpha =
      family_tests == 0 ? 0 : settings.false_alarm * (1 - (measurements > 0 ? row_share : 0)) / static_cast<double>(family_tests);
  // Of a family's flagged sets, the most significant one speaks for it: its sizes are where the
  // change is (a set that also holds unchanged sizes has a smaller mean change), and a row of an
  // unchanged size that its own noise put past the tolerance is not blamed with it.
  std::map<std::string, FamilyFlag> best;
  std::map<std::string, const RowSet*> best_set;
  for (const RowSet& set : sets) {
    std::vector<double> b, c;  // exp(mean log) of the set in each run that has all of it
    const auto mean_of = [&](const std::vector<double>& logs, std::vector<double>& out) {
      double sum = 0;
      for (const size_t index : set.indices) {
        if (std::isnan(logs[index])) return;
        sum += logs[index];
      }
      out.push_back(std::exp(sum / static_cast<double>(set.keys.size())));
    };
    for (const auto& logs : baseline_logs) mean_of(logs, b);
    for (const auto& logs : current_logs) mean_of(logs, c);
    if (b.size() < 2 || c.empty()) continue;
    const bool worse_is_up = direction_of(*set.first) == Direction::lower_is_better;
    const NoiseJudgement j = judge_between_runs(b, c, worse_is_up, row_noise(b, {}), NoisePrior{}, family_alpha);
    if (!j.outside || !(j.change > settings.tolerance)) continue;
    const Record& r = *set.first;
    std::string what = r.labels.op.empty() ? r.suite : r.labels.op;
    for (const std::string* part : {&r.labels.dtype, &r.labels.placement, &r.metric}) {
      if (!part->empty()) what += " " + *part;
    }
    const std::string reason = what + " " + set.sizes + " (" + std::to_string(set.keys.size()) + " rows): " +
                               signed_percent(j.change) + " worse together, beyond the " + signed_percent(j.limit) +
                               " the between-run noise of their mean allows (sd " + percent(j.sd) + " over " +
                               std::to_string(b.size()) + " baseline runs; p " + format_number(j.p) + " < " +
                               format_number(family_alpha) + ")";
    FamilyFlag& flag = best[set.family];
    if (flag.reason.empty() || j.p < flag.p) {
      flag = {j.p, reason};
      best_set[set.family] = &set;
    }
  }
  for (const auto& [family, set] : best_set) {
    for (const std::string& key : set->keys) between.family[key] = best.at(family);
  }

  const size_t min_runs = settings.min_runs > 0 ? settings.min_runs : min_baseline_runs(settings.false_alarm);
  Comparison result =
      compare_core(reference_baseline, reference_current, settings, judged.empty() ? nullptr : &between, min_runs);
  result.baseline_runs = baselines.size();
  result.current_runs = currents.size();
  result.noise_judged = judged.size();
  result.noise_measurements = measurements;
  result.row_alpha = between.row_alpha;
  result.family_tests = family_tests;
  result.family_alpha = family_alpha;
  return result;
}

}  // namespace dts

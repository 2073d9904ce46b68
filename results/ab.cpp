// compare_ab: the paired judgement of interleaved A/B rounds (ab.h). Why paired: on a shared
// machine whole runs move between states (results/baselines/README.md measured 20% to 5x), and a
// state that lasts longer than a round falls on A and B alike, so the per-round ratio b / a
// cancels it where the two runs' own values would not. What it cannot cancel: a state that
// changes within a round (it adds noise, and the verdict turns `unknown`, not wrong), and a
// difference in order (A always first); `dtsuite ab` alternates the order (AB, BA, AB, ...) so
// that a drift within rounds falls on both sides alike.
#include "results/ab.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "core/error.h"
#include "results/noise.h"
#include "results/runs.h"

namespace dts {

std::string_view name(AbVerdict verdict) {
  switch (verdict) {
    case AbVerdict::same: return "same";
    case AbVerdict::different: return "different";
    case AbVerdict::unknown: return "unknown";
    case AbVerdict::not_judged: return "-";
  }
  return "?";
}

namespace {

constexpr size_t kMaxRoundsNeeded = 10000;

// One row's values over the rounds: NaN where a round lacks it; the first round with a failed
// check on either side.
struct RoundValues {
  std::vector<double> a, b;
  size_t failed_round = 0;  // 1-based; 0: none
  char failed_side = ' ';
};

bool usable(double v) { return v > 0 && std::isfinite(v); }

}  // namespace

AbComparison compare_ab(const std::vector<AbRound>& rounds, const AbSettings& settings) {
  if (rounds.size() < 2) {
    throw Error(Error::Kind::invalid_argument, "an A/B comparison needs 2 rounds or more (their spread is its noise); " +
                                                   std::to_string(rounds.size()) + " given");
  }
  for (size_t r = 0; r < rounds.size(); ++r) {
    if (rounds[r].a.empty() || rounds[r].b.empty()) {
      throw Error(Error::Kind::invalid_argument, "round " + std::to_string(r + 1) + " has no rows for " +
                                                     (rounds[r].a.empty() ? "A" : "B"));
    }
  }
  // Jobs of different sizes measure different things under one case id (a sub-world's placement,
  // the job's busbw factor): refused, as compare refuses them.
  const int size_a = job_size(rounds.front().a.front()), size_b = job_size(rounds.front().b.front());
  if (size_a != size_b) {
    throw Error(Error::Kind::invalid_argument, "A ran a job of " + std::to_string(size_a) + " ranks and B one of " +
                                                   std::to_string(size_b) + "; an A/B comparison needs jobs of one size");
  }

  // Rows in A's first round's order; each key's values over the rounds.
  const std::vector<Record>& first_a = rounds.front().a;
  std::map<std::string, size_t> index;
  std::vector<std::string> keys;
  std::map<std::string, size_t> label_uses;
  for (const Record& r : first_a) {
    const std::string key = join_key(r);
    if (!index.emplace(key, keys.size()).second) continue;
    keys.push_back(key);
    ++label_uses[r.suite + '\x1f' + r.case_id + '\x1f' + r.labels.placement + '\x1f' + r.metric];
  }
  std::vector<RoundValues> values(keys.size());
  for (RoundValues& v : values) {
    v.a.assign(rounds.size(), std::nan(""));
    v.b.assign(rounds.size(), std::nan(""));
  }
  std::vector<const Record*> first_b(keys.size(), nullptr);
  AbComparison result;
  result.rounds = rounds.size();
  for (size_t r = 0; r < rounds.size(); ++r) {
    for (const char side : {'A', 'B'}) {
      std::set<std::string> seen;
      for (const Record& rec : side == 'A' ? rounds[r].a : rounds[r].b) {
        const std::string key = join_key(rec);
        if (!seen.insert(key).second) continue;  // a key twice in one run: its first row
        const auto it = index.find(key);
        if (it == index.end()) {
          if (r == 0 && side == 'B') ++result.only_b;
          continue;
        }
        RoundValues& v = values[it->second];
        if (side == 'B' && r == 0) first_b[it->second] = &rec;
        if (is_failure(rec.verdict) && v.failed_round == 0) {
          v.failed_round = r + 1;
          v.failed_side = side;
        }
        (side == 'A' ? v.a : v.b)[r] = rec.value;
      }
    }
  }

  // The rows judged, and the measurements among them (a bandwidth of a judged time is the same
  // samples: no chance of a false alarm of its own).
  const auto judged = [&](size_t i) { return values[i].failed_round == 0 && first_b[i] != nullptr; };
  std::vector<const Record*> row_of(keys.size(), nullptr);
  for (const Record& r : first_a) {
    const size_t i = index.at(join_key(r));
    if (!row_of[i]) row_of[i] = &r;
  }
  std::set<std::string> judged_times;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (judged(i) && direction_of(*row_of[i]) != Direction::not_judged && row_of[i]->metric == "time") {
      judged_times.insert(keys[i]);
    }
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    const Record& r = *row_of[i];
    if (!judged(i) || direction_of(r) == Direction::not_judged) continue;
    const bool derived = r.unit == "bytes_per_second" && judged_times.count(join_key(r, "time"));
    result.measurements += derived ? 0 : 1;
  }
  result.row_alpha = result.measurements == 0 ? 0 : settings.false_alarm / static_cast<double>(result.measurements);
  const double band = std::log1p(settings.tolerance);

  for (size_t i = 0; i < keys.size(); ++i) {
    const Record& a = *row_of[i];
    const RoundValues& v = values[i];
    AbRow row;
    row.a = a;
    row.label = a.case_id + (a.labels.placement.empty() ? "" : " " + a.labels.placement);
    if (label_uses[a.suite + '\x1f' + a.case_id + '\x1f' + a.labels.placement + '\x1f' + a.metric] > 1 &&
        !a.labels.config.empty()) {
      row.label += " " + a.labels.config;
    }
    row.direction = direction_of(a);
    if (!first_b[i]) {
      ++result.only_a;
      continue;
    }
    row.b = *first_b[i];
    std::vector<double> av, bv, d;
    for (size_t r = 0; r < rounds.size(); ++r) {
      if (std::isfinite(v.a[r])) av.push_back(v.a[r]);
      if (std::isfinite(v.b[r])) bv.push_back(v.b[r]);
      if (usable(v.a[r]) && usable(v.b[r])) d.push_back(std::log(v.b[r]) - std::log(v.a[r]));
    }
    if (!av.empty()) row.a.value = median_of(av);
    if (!bv.empty()) row.b.value = median_of(bv);
    row.rounds = d.size();
    const auto finish = [&](AbVerdict verdict) {
      row.verdict = verdict;
      switch (verdict) {
        case AbVerdict::same: ++result.same; break;
        case AbVerdict::different:
          ++result.different;
          result.b_worse += row.b_worse ? 1 : 0;
          break;
        case AbVerdict::unknown:
          ++result.unknown;
          result.rounds_needed = std::max(result.rounds_needed, row.rounds_needed);
          break;
        case AbVerdict::not_judged: ++result.not_judged; break;
      }
      result.rows.push_back(std::move(row));
    };
    if (v.failed_round > 0) {
      row.failed_side = v.failed_side;
      ++(v.failed_side == 'A' ? result.failed_a : result.failed_b);
      row.reason = std::string("a failed check in ") + v.failed_side + " (round " + std::to_string(v.failed_round) +
                   "): correctness is the runs' own verdicts";
      finish(AbVerdict::not_judged);
      continue;
    }
    if (row.direction == Direction::not_judged) {
      finish(AbVerdict::not_judged);
      continue;
    }
    if (d.size() < 2) {
      row.reason = d.empty() ? "no round has a positive value on both sides (a ratio needs one)"
                             : "a positive value on both sides in 1 round; 2 needed";
      finish(AbVerdict::not_judged);
      continue;
    }
    const double n = static_cast<double>(d.size());
    double mean = 0;
    for (double x : d) mean += x;
    mean /= n;
    double ss = 0;
    for (double x : d) ss += (x - mean) * (x - mean);
    const double sd = std::sqrt(ss / (n - 1));
    const double se = sd / std::sqrt(n);
    const double df = n - 1;
    const double critical = student_t_quantile(1 - result.row_alpha / 2, df);
    row.change = std::expm1(mean);
    row.low = std::expm1(mean - critical * se);
    row.high = std::expm1(mean + critical * se);
    row.p_value = se > 0 ? 2 * student_t_cdf(-std::fabs(mean) / se, df) : (mean == 0 ? 1 : 0);
    // Worse: B's time up, or B's bandwidth (throughput, efficiency) down.
    const bool b_up = mean > 0;
    const bool worse = (row.direction == Direction::lower_is_better) == b_up;
    const std::string interval = signed_percent(row.change) + " (interval " + signed_percent(row.low) + " .. " +
                                 signed_percent(row.high) + " over " + std::to_string(d.size()) + " rounds, p " +
                                 format_number(row.p_value) + ")";
    if (row.p_value < result.row_alpha && std::fabs(mean) > band) {
      row.b_worse = worse;
      row.reason = "B " + interval + ": " + (worse ? "worse" : "better") + " than A beyond the paired noise";
      finish(AbVerdict::different);
      continue;
    }
    if (mean - critical * se >= -band && mean + critical * se <= band) {
      row.reason = "B " + interval + ": within the " + signed_percent(settings.tolerance).substr(1) + " tolerance either way";
      finish(AbVerdict::same);
      continue;
    }
    // Neither: the rounds that would narrow the interval enough, at this spread and this t.
    const double room = std::fabs(mean) > band ? std::fabs(mean) : band - std::fabs(mean);
    size_t needed = kMaxRoundsNeeded;
    if (room > 0) {
      const double rounds_for = std::ceil(std::pow(critical * sd / room, 2));
      if (rounds_for < static_cast<double>(kMaxRoundsNeeded)) needed = static_cast<size_t>(rounds_for);
    }
    row.rounds_needed = std::max(needed, d.size() + 1);
    row.reason = "B " + interval + ": undecided; about " + std::to_string(row.rounds_needed) + " rounds would decide it";
    finish(AbVerdict::unknown);
  }
  return result;
}

}  // namespace dts

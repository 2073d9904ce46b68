// Outliers among peers (results/outliers.h).
#include "results/outliers.h"

#include <algorithm>
#include <cmath>

namespace dts {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

double robust_spread(const Stats& stats) {
  if (stats.n < 2) return 0;
  const double spread = (stats.p95 - stats.p05) / 3.29;
  return std::isfinite(spread) && spread > 0 ? spread : 0;
}

OutlierVerdict judge_against(const PeerValue& subject, const std::vector<PeerValue>& peers, bool higher_is_better,
                             double min_shortfall) {
  OutlierVerdict v;
  if (!std::isfinite(subject.value)) return v;
  std::vector<double> values, spreads;
  for (const PeerValue& p : peers) {
    if (!std::isfinite(p.value)) continue;
    values.push_back(p.value);
    spreads.push_back(p.spread);
  }
  v.peers = static_cast<int>(values.size());
  if (v.peers < OutlierRule::kMinPeers) return v;
  v.judged = true;
  v.peer_median = median(values);
  std::vector<double> deviations;
  for (double x : values) deviations.push_back(std::fabs(x - v.peer_median));
  const double between = 1.4826 * median(deviations);
  const double within = std::max(subject.spread, median(spreads));
  v.noise = std::max(between, within);
  const double worse_by = higher_is_better ? v.peer_median - subject.value : subject.value - v.peer_median;
  v.shortfall = v.peer_median != 0 ? worse_by / std::fabs(v.peer_median) : 0;
  const double margin = std::max(OutlierRule::kZ * v.noise, min_shortfall * std::fabs(v.peer_median));
  v.bound = higher_is_better ? v.peer_median - margin : v.peer_median + margin;
  v.named = worse_by > margin;
  return v;
}

std::vector<OutlierVerdict> judge_outliers(const std::vector<PeerValue>& subjects, bool higher_is_better,
                                           double min_shortfall) {
  std::vector<OutlierVerdict> out(subjects.size());
  for (size_t i = 0; i < subjects.size(); ++i) {
    std::vector<PeerValue> peers;
    for (size_t j = 0; j < subjects.size(); ++j) {
      if (j != i) peers.push_back(subjects[j]);
    }
    out[i] = judge_against(subjects[i], peers, higher_is_better, min_shortfall);
  }
  return out;
}

std::vector<std::vector<PartnerVerdict>> judge_with_partners(const std::vector<int>& group,
                                                             const std::vector<PartnerFigure>& figures) {
  const size_t n = group.size();
  std::vector<bool> held(n, false);
  std::vector<std::vector<PartnerVerdict>> held_verdicts(figures.size(), std::vector<PartnerVerdict>(n));
  std::vector<int> named_order;
  for (;;) {
    std::vector<std::vector<PartnerVerdict>> round(figures.size(), std::vector<PartnerVerdict>(n));
    for (size_t f = 0; f < figures.size(); ++f) {
      for (size_t s = 0; s < n; ++s) {
        if (held[s]) {
          round[f][s] = held_verdicts[f][s];
          continue;
        }
        std::vector<double> values, spreads;
        std::vector<bool> partner_left_out(n, false);
        for (const PartnerCell& cell : figures[f].cells) {
          if (cell.subject != static_cast<int>(s) || cell.partner < 0 || static_cast<size_t>(cell.partner) >= n) continue;
          if (held[static_cast<size_t>(cell.partner)]) {
            partner_left_out[static_cast<size_t>(cell.partner)] = true;
            continue;
          }
          if (!std::isfinite(cell.value.value)) continue;
          values.push_back(cell.value.value);
          spreads.push_back(cell.value.spread);
        }
        PartnerVerdict& out = round[f][s];
        out.cells = static_cast<int>(values.size());
        if (!values.empty()) out.value = {median(values), median(spreads)};
        for (int q : named_order) {
          if (partner_left_out[static_cast<size_t>(q)]) out.left_out.push_back(q);
        }
      }
    }
    int worst = -1;
    double worst_factor = 1;
    for (size_t f = 0; f < figures.size(); ++f) {
      const PartnerFigure& figure = figures[f];
      for (size_t s = 0; s < n; ++s) {
        if (held[s]) continue;
        std::vector<PeerValue> peers;
        for (size_t q = 0; q < n; ++q) {
          if (q != s && group[q] == group[s]) peers.push_back(round[f][q].value);
        }
        const double floor = s < figure.min_shortfall.size() ? figure.min_shortfall[s] : OutlierRule::kMinShortfall;
        PartnerVerdict& out = round[f][s];
        out.verdict = judge_against(out.value, peers, figure.higher_is_better, floor);
        if (!out.verdict.named) continue;
        // How many times worse: a bandwidth a quarter of the median and a time four times it alike.
        const double factor = figure.higher_is_better
                                  ? (out.value.value > 0 ? out.verdict.peer_median / out.value.value : HUGE_VAL)
                                  : out.value.value / out.verdict.peer_median;
        if (worst < 0 || factor > worst_factor) worst = static_cast<int>(s), worst_factor = factor;
      }
    }
    if (worst < 0) return round;
    held[static_cast<size_t>(worst)] = true;
    named_order.push_back(worst);
    for (size_t f = 0; f < figures.size(); ++f) held_verdicts[f][static_cast<size_t>(worst)] = round[f][static_cast<size_t>(worst)];
  }
}

double mad_spread(const std::vector<double>& samples) {
  if (samples.size() < 2) return 0;
  const double m = median(samples);
  std::vector<double> deviations;
  for (double x : samples) deviations.push_back(std::fabs(x - m));
  return 1.4826 * median(deviations);
}

std::string describe_shortfall(const OutlierVerdict& v, bool higher_is_better, const std::string& peer_median_text) {
  const double percent = std::round(std::fabs(v.shortfall) * 100);
  const bool worse = v.shortfall > 0;
  std::string direction = higher_is_better == worse ? "below" : "above";
  return std::to_string(static_cast<long long>(percent)) + "% " + direction + " the median of its " +
         std::to_string(v.peers) + (v.peers == 1 ? " peer" : " peers") + " (" + peer_median_text + ")";
}

}  // namespace dts

// Outliers among peers: which rank, pair or node of a figure (a throughput, a bandwidth, a time)
// falls short of the others by more than the run's own noise allows. The rule, one for every
// figure that names outliers (the hardware suite's per-rank measurements first):
//
//   peers        every other subject of the figure with a finite value (at least kMinPeers);
//   m            the median of the peers' values;
//   between      1.4826 x the median absolute deviation of the peers from m (a standard deviation
//                for normal data; Iglewicz & Hoaglin, "How to Detect and Handle Outliers", 1993,
//                whose modified z-score 0.6745 (x - m) / MAD > 3.5 this is);
//   within       the subject's own spread over its iterations, and the peers' median spread,
//                each as a standard deviation (1.4826 x the iterations' median absolute deviation
//                where the samples are at hand, as in the hardware suite; else from the 5th..95th
//                percentiles, (p95 - p05) / 3.29), the larger of the two: a noisy run widens the
//                band for everyone;
//   noise        the larger of between and within;
//   named when   it falls short of m (below it for a throughput, above it for a time) by more than
//                kZ x noise, and by more than kMinShortfall of m.
//
// The floor keeps a tight group from naming a healthy part for a difference its few peers' spread
// cannot tell from chance (three peers give a poor MAD; boost clocks of one GPU model differ by a
// few percent between healthy parts). The
// median of the peers, not of all, so that the subject cannot pull the reference towards itself.
// Depends on nothing but Record's Stats.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "results/record.h"

namespace dts {

struct PeerValue {
  double value = std::nan("");  // the subject's figure (a median over its iterations)
  double spread = 0;            // its iterations' spread as a standard deviation, same unit; 0: none
};

struct OutlierVerdict {
  bool judged = false;   // enough peers with a value
  bool named = false;    // an outlier
  int peers = 0;
  double peer_median = std::nan(""), noise = std::nan("");
  double shortfall = 0;  // how far short of peer_median, as a fraction of it (0.62: 62% worse)
  double bound = std::nan("");  // the value past which it is named (a threshold in the figure's unit)
};

struct OutlierRule {
  static constexpr double kZ = 3.5;              // Iglewicz & Hoaglin's cut on the modified z-score
  // And at least 20% worse than the peers' median: healthy ranks of one shared machine measured
  // up to 13% apart with the noise band narrower than that (4 ranks on 2 cores, triad alone).
  static constexpr double kMinShortfall = 0.20;
  static constexpr int kMinPeers = 2;            // a median and a spread need two
};

// One verdict per subject, in order. `higher_is_better`: throughputs and bandwidths (short of the
// median is below it); else times (above it).
// `min_shortfall`: the floor, as a fraction of the median (a time 3.0 above it is 4x as long); a
// caller that knows its figures are noisier than their spread shows raises it, and says so.
std::vector<OutlierVerdict> judge_outliers(const std::vector<PeerValue>& subjects, bool higher_is_better,
                                           double min_shortfall = OutlierRule::kMinShortfall);

// One subject against peers given apart from it, by the same rule: a node's figure against the
// cells of the other nodes, where the subjects and their peers are not one list.
OutlierVerdict judge_against(const PeerValue& subject, const std::vector<PeerValue>& peers, bool higher_is_better,
                             double min_shortfall = OutlierRule::kMinShortfall);

// Subjects measured only in pairs, as a pair matrix's ranks are: a cell with a bad partner (rank 3
// sending to a slow rank 2) is slow through no fault of the subject, and that one cell with one
// noisy other makes a healthy rank's median slow. So partners are explained away: each subject is
// judged by the median of its cells against the other subjects of its group (judge_against); the
// worst of those named (the largest factor worse, over every figure) is held named with what it was
// judged by, its cells are left out of everyone else's, and the rest are judged again, until no
// new subject is named. A subject named only through partners named before it is not named; one
// bad in its own right still is (its cells with good partners are slow too).
struct PartnerCell {
  int subject = 0, partner = 0;  // a cell counts for its subject; a latency cell is given once each way
  PeerValue value;
};

struct PartnerFigure {
  std::vector<PartnerCell> cells;
  bool higher_is_better = true;
  std::vector<double> min_shortfall;  // per subject; empty: OutlierRule::kMinShortfall for all
};

struct PartnerVerdict {
  PeerValue value;              // the median of its counted cells' values and of their spreads; NaN: none
  OutlierVerdict verdict;
  int cells = 0;                // cells counted
  std::vector<int> left_out;    // partners named before it whose cells with it were left out, in that order
};

// result[f][s] for figure f and subject s; group[s]: the subject's group (its node), the size of
// group is the count of subjects. A subject without cells has a NaN value and is not judged.
std::vector<std::vector<PartnerVerdict>> judge_with_partners(const std::vector<int>& group,
                                                             const std::vector<PartnerFigure>& figures);

// Samples' spread as a standard deviation: 1.4826 x their median absolute deviation (a few slow
// calls of a machine busy with something else move it little, where a standard deviation or the
// 5th..95th percentiles would follow them); 0 for fewer than two samples.
double mad_spread(const std::vector<double>& samples);

// A distribution's spread as a standard deviation, from its 5th and 95th percentiles (a normal
// variable's lie 3.29 standard deviations apart); 0 without a distribution.
double robust_spread(const Stats& stats);

// "62% below the median of its 3 peers (58 GFLOP/s)" style words for a verdict: `shown(x)`
// formats a value of the figure for people.
std::string describe_shortfall(const OutlierVerdict& v, bool higher_is_better, const std::string& peer_median_text);

}  // namespace dts

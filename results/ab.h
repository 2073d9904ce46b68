// Interleaved A/B: two stacks (two builds, two libraries, two environments) measured round by
// round in one session, each round one run of A and one of B, so that a slow state of the machine
// falls on both sides of a round; each row is judged on its paired rounds (Pinpoint-style):
// `different`, `same`, or `unknown` with the rounds that would decide it. `dtsuite ab` runs the
// rounds (harness/ab_command.cpp); this file judges them. Depends on Record only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "results/compare.h"
#include "results/record.h"

namespace dts {

struct AbSettings {
  // A change within this (relative, either way) is `same`; `different` needs more than it.
  double tolerance = 0.05;
  // The chance that a session of two identical stacks calls some row `different`, shared by the
  // measurements judged (Bonferroni; a bandwidth computed from a judged time adds none).
  double false_alarm = 0.05;
};

enum class AbVerdict : uint8_t {
  same,        // the change lies within the tolerance, with confidence
  different,   // B differs from A by more than the tolerance, beyond the paired noise
  unknown,     // neither can be said from these rounds: more rounds would decide it
  not_judged,  // no direction (errors, counts), a failed check on a side, or fewer than 2 rounds
};
std::string_view name(AbVerdict verdict);

struct AbRow {
  Record a, b;             // the first round's rows of each side (labels; values: medians over rounds)
  std::string label;       // case id and placement, and config when needed to tell rows apart
  Direction direction = Direction::not_judged;
  AbVerdict verdict = AbVerdict::not_judged;
  size_t rounds = 0;       // rounds in which both sides have a usable value
  // B against A: exp(mean over rounds of ln(b / a)) - 1, its two-sided confidence interval at the
  // row's false-alarm rate, and the paired t test's two-sided p (no change).
  double change = std::numeric_limits<double>::quiet_NaN();
  double low = std::numeric_limits<double>::quiet_NaN(), high = std::numeric_limits<double>::quiet_NaN();
  double p_value = std::numeric_limits<double>::quiet_NaN();
  bool b_worse = false;    // different, in the worse direction of the metric (B slower, lower bandwidth)
  char failed_side = 0;    // 'A' or 'B': a check of the row failed in that side (first round it did); not timed
  size_t rounds_needed = 0;  // unknown: about how many rounds in all would decide it (0: not estimable)
  std::string reason;
};

struct AbComparison {
  std::vector<AbRow> rows;  // A's first round's order
  size_t rounds = 0;
  size_t same = 0, different = 0, b_worse = 0, unknown = 0, not_judged = 0;
  size_t only_a = 0, only_b = 0;  // rows one side lacks in its first round (other cases, other names)
  size_t failed_a = 0, failed_b = 0;  // rows not timed because a check failed in A, in B
  size_t measurements = 0;        // rows judged, less the bandwidths of judged times
  double row_alpha = 0;           // each measurement's two-sided false-alarm rate
  size_t rounds_needed = 0;       // the most any unknown row needs
};

// One round: A's rows and B's rows (one run each).
struct AbRound {
  std::vector<Record> a, b;
};

// Judges the rounds (two or more, in order). Rows are joined as compare joins (join_key: the case
// and its labels, not the stack); a row is judged on the rounds where both sides have a positive
// finite value: d = ln(b / a) per round, paired t with rounds - 1 degrees of freedom. Throws
// Error{invalid_argument} with one line when there are fewer than 2 rounds or when the two sides
// ran jobs of different sizes.
AbComparison compare_ab(const std::vector<AbRound>& rounds, const AbSettings& settings);

}  // namespace dts

// The one-sided Mann–Whitney U test compare uses on per-iteration samples (compare --samples).
#include "results/mann_whitney.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace dts {

namespace {

constexpr size_t kExactLimit = 50;  // exact U distribution up to this many samples a side

}  // namespace

double mann_whitney_smallest_p(size_t n, size_t m) {
  // 1 / C(n+m, n), as a product to stay in range.
  double p = 1;
  for (size_t k = 1; k <= std::min(n, m); ++k) p *= static_cast<double>(k) / static_cast<double>(std::max(n, m) + k);
  return p;
}

double mann_whitney_p_greater(const std::vector<double>& worse_in, const std::vector<double>& better_in) {
  // A sample that is not a number (a CSV may say nan) has no rank: it is left out, and it would
  // otherwise break the sort's ordering and the tie count (NaN equals nothing, not even itself).
  const auto finite = [](const std::vector<double>& in) {
    std::vector<double> out;
    std::copy_if(in.begin(), in.end(), std::back_inserter(out), [](double v) { return !std::isnan(v); });
    return out;
  };
  const std::vector<double> worse = finite(worse_in), better = finite(better_in);
  const size_t n = worse.size(), m = better.size();
  if (n == 0 || m == 0) return 1;
  double u = 0;
  for (double x : worse) {
    for (double y : better) u += x > y ? 1.0 : (x == y ? 0.5 : 0.0);
  }
  std::vector<double> all(worse);
  all.insert(all.end(), better.begin(), better.end());
  std::sort(all.begin(), all.end());
  double tie_term = 0;  // sum of t^3 - t over groups of t tied values
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    while (j < all.size() && all[j] == all[i]) ++j;
    const auto t = static_cast<double>(j - i);
    tie_term += t * t * t - t;
    i = j;
  }
  if (tie_term == 0 && n <= kExactLimit && m <= kExactLimit) {
    // Exact: count the arrangements of n worse and m better values by their U. The largest value
    // is either a `worse` one, beating all j `better` ones (U grows by j), or a `better` one:
    // f(i, j, u) = f(i-1, j, u-j) + f(i, j-1, u). All additions of positive counts, so the doubles
    // stay accurate (C(100, 50) ~ 1e29 is well inside their range).
    const size_t max_u = n * m;
    std::vector<std::vector<double>> previous(m + 1, std::vector<double>(max_u + 1, 0)), row = previous;
    for (size_t j = 0; j <= m; ++j) previous[j][0] = 1;  // i = 0: no worse values, U = 0
    for (size_t i = 1; i <= n; ++i) {
      for (size_t j = 0; j <= m; ++j) {
        std::fill(row[j].begin(), row[j].end(), 0);
        for (size_t v = 0; v <= i * j; ++v) {
          double count = v >= j ? previous[j][v - j] : 0;
          if (j > 0) count += row[j - 1][v];
          row[j][v] = count;
        }
      }
      std::swap(previous, row);
    }
    const std::vector<double>& counts = previous[m];
    double total = 0, tail = 0;
    const auto observed = static_cast<size_t>(u);  // an integer without ties
    for (size_t v = 0; v <= max_u; ++v) {
      total += counts[v];
      if (v >= observed) tail += counts[v];
    }
    return tail / total;
  }
  const auto nd = static_cast<double>(n), md = static_cast<double>(m), total = nd + md;
  const double mean = nd * md / 2;
  const double variance = nd * md / 12 * ((total + 1) - tie_term / (total * (total - 1)));
  if (variance <= 0) return 1;  // every value equal: no evidence either way
  const double z = (u - mean - 0.5) / std::sqrt(variance);  // 0.5: continuity correction
  return 0.5 * std::erfc(z / std::sqrt(2.0));
}

}  // namespace dts

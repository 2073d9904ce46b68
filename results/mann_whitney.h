// The within-run noise test of `compare --samples`.
#pragma once
#include <cstddef>
#include <vector>

namespace dts {

// One-sided Mann–Whitney U test. U counts the pairs (x from `worse`, y from `better`) with x > y,
// ties counting 1/2; returns P(U >= observed) when both samples come from one distribution. Exact
// (the permutation distribution) without ties up to 50 samples a side; otherwise the normal
// approximation with tie and continuity corrections.
double mann_whitney_p_greater(const std::vector<double>& worse, const std::vector<double>& better);

// The smallest p-value the exact test can give with n and m samples: 1 / C(n+m, n).
double mann_whitney_smallest_p(size_t n, size_t m);

}  // namespace dts

// Helpers shared by the strategies' MPI tests: comparing a run with the reference and checking
// that every rank holds the same parameters.
#pragma once
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace dts::strategy_testing {

inline double max_abs_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

// Every rank's parameters equal rank 0's, bit for bit (replicas, or gathers, must not drift).
inline void expect_replicas_identical(const std::vector<double>& mine) {
  std::vector<double> root = mine;
  MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  EXPECT_EQ(std::memcmp(root.data(), mine.data(), mine.size() * sizeof(double)), 0);
}

}  // namespace dts::strategy_testing

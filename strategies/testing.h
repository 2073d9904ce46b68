// Helpers shared by the strategies' MPI tests: comparing a run with the reference and checking
// that every rank holds the same parameters.
#pragma once
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "strategies/single/single_trainer.h"

namespace dts::strategy_testing {

// The optimizers the strategies' MPI tests train with: SGD with momentum (lr 0.05, 0.9) or AdamW
// (lr 0.01, PyTorch's other defaults).
inline TrainConfig test_train_config(OptimizerKind optimizer) {
  TrainConfig train;
  train.optimizer = optimizer;
  train.sgd.lr = 0.05;
  train.sgd.momentum = 0.9;
  train.adamw.lr = 0.01;
  return train;
}

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

// The single-process reference after `steps` steps of `rows`-row global batches (batch s holds
// samples [s * rows, (s + 1) * rows)); the loss of each step is appended to `losses` if given.
inline std::vector<double> run_single(const ModelSpec& spec, const TrainConfig& train, int steps, int64_t rows,
                                      std::vector<double>* losses = nullptr) {
  SingleTrainer<double> single(spec, train);
  for (int s = 0; s < steps; ++s) {
    const double loss = single.step(make_batch(spec, s * rows, rows));
    if (losses) losses->push_back(loss);
  }
  return single.parameters();
}

}  // namespace dts::strategy_testing

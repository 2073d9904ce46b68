// The flags the training suites share (equivalence, scaling): which strategies, the model, the
// batch and the steps. One group, read by each suite with options.flags<TrainingFlags>().
#pragma once
#include <string>
#include <vector>

#include "strategies/single/single_trainer.h"
#include "strategies/strategy_spec.h"
#include "strategies/workload.h"
#include "suites/suite.h"

namespace dts {

class TrainingFlags final : public FlagGroup {
 public:
  static constexpr const char* kGroup = "training";
  // Strategy specs, "NAME" or "NAME(key=value,...)" (strategies/strategy_spec.h); empty: every
  // registered one, each at every layout the job's ranks allow.
  std::vector<std::string> strategies;
  int steps = 5;                                         // --steps: training steps compared
  int batch = 64;                                        // --batch: global batch rows
  int layers = 3, width = 64, input = 32, classes = 10;  // --layers --width --input --classes
  int accumulation = 1;   // --accumulation: micro-batches per step (ddp, zero, tp)
  int microbatches = 4;   // --microbatches: pipeline micro-batches per step (gpipe, 1f1b, hybrid)
  // --optimizer: what the equivalence suite trains with, in the order given (sgd, adamw or both).
  std::vector<OptimizerKind> optimizers{OptimizerKind::sgd, OptimizerKind::adamw};
  // --straggler RANK:FACTOR: that rank of every layout computes FACTOR times slower (-1: none).
  int straggler_rank = -1;
  double straggler_factor = 1;

  void declare(CLI::App& group) override;
  void finish(const RunOptions& common) override;
  // The model of the flags, its parameters and data keyed by the run's seed.
  ModelSpec model(const RunOptions& common) const;
  // The training suites' shared refusals, at plan (the ranks are known there, not in finish), on
  // every rank alike: Error{invalid_argument}, one line, exit 2, before anything runs.
  // A strategy named in --strategy that has no layout where the suite trains it (`layouts` found
  // on `ranks`, e.g. "1..4 ranks"; why_no_layout asked about `world`); under `all` a suite leaves
  // such a strategy out instead.
  void require_layout(const StrategySpec& spec, size_t layouts, const std::string& ranks, int world,
                      const LayoutDefaults& defaults) const;
  // A --straggler rank outside the largest layout the suite trains (`ranks` ranks, `whose` says
  // whose: "the job's"): no layout would have it, and the run would go as if it were not given.
  void check_straggler(int ranks, const std::string& whose) const;

 private:
  std::string strategies_text_ = "all";
  std::string optimizer_text_ = "sgd,adamw";
  std::string straggler_text_;
};

}  // namespace dts

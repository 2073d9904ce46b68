// The planner's fits against a replay: each operation class a replay timed (suites/replay, its
// `time` rows) priced by the alpha-beta fit of the same collective, dtype and group shape in the
// stack's measurements (measurements.h), so that the model the planner plans with is checked on a
// real job's traffic, class by class: `dtsuite trace predict REPLAY.csv --measurements M.csv`.
//
// A class is priced by: its collective's fit (all_reduce, reduce_scatter, all_gather, broadcast,
// reduce, all_to_all) at the class's bytes (nccl-tests' size, as the collectives suite's rows
// count them); send and recv by the one-way point-to-point fit of the link (topology suite:
// same-node when the group is on one node, other-node otherwise); send_recv by the collectives
// suite's send_recv fit. A group shape the measurements lack is extended by the ring model and
// said (Measurements::extended). Not priced, each with its reason: barriers (no measurement
// times one), all_to_allv (its splits are uneven: the all_to_all fit prices even blocks only),
// bytes-only classes (no dtype to look up), and what the files do not measure.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "planner/measurements.h"
#include "results/record.h"

namespace dts::planner {

struct ReplayClassPrediction {
  std::string case_id, op, dtype;
  int64_t bytes = 0;
  GroupShape shape;
  double measured = 0, predicted = 0;
  std::string basis;  // "all_reduce f32 on 4 ranks on 1 node", "+ extended from ..." where extended
  double error() const { return measured > 0 ? (predicted - measured) / measured : 0; }
};

struct ReplayPredictions {
  std::vector<ReplayClassPrediction> priced;
  std::vector<std::string> unpriced;  // "barrier/none/0/g0-3: a barrier is not measured"
  // The median of |error| over each op's priced classes.
  std::map<std::string, double> median_abs_error() const;
};

// `replay` as read_results_csv gives a replay run's rows; its `time` rows are the classes.
ReplayPredictions predict_replay(const std::vector<Record>& replay, const Measurements& measurements);

}  // namespace dts::planner

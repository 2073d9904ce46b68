// Pipeline schedules (schedule.h).
#include "strategies/pipeline/schedule.h"

#include <algorithm>

#include "core/error.h"

namespace dts {

std::vector<PipelineOp> pipeline_schedule(PipelineSchedule schedule, int stages, int stage, int microbatches) {
  if (stages < 1 || stage < 0 || stage >= stages || microbatches < 1) {
    throw Error(Error::Kind::invalid_argument, "pipeline_schedule: bad stage or micro-batch count");
  }
  std::vector<PipelineOp> ops;
  if (schedule != PipelineSchedule::one_f_one_b) {
    for (int j = 0; j < microbatches; ++j) ops.push_back({true, j});
    for (int j = 0; j < microbatches; ++j) ops.push_back({false, j});
    return ops;
  }
  const int warmup = std::min(stages - stage - 1, microbatches);
  int forwards = 0, backwards = 0;
  for (; forwards < warmup; ++forwards) ops.push_back({true, forwards});
  while (forwards < microbatches) {  // steady state: one forward, one backward
    ops.push_back({true, forwards++});
    ops.push_back({false, backwards++});
  }
  while (backwards < microbatches) ops.push_back({false, backwards++});  // cool-down
  return ops;
}

double bubble_fraction_theory(int stages, int microbatches) {
  return static_cast<double>(stages - 1) / static_cast<double>(microbatches + stages - 1);
}

int microbatches_in_flight_theory(PipelineSchedule schedule, int stages, int stage, int microbatches) {
  if (schedule != PipelineSchedule::one_f_one_b) return microbatches;
  return std::min(microbatches, stages - stage);
}

}  // namespace dts

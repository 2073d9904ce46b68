// Pipeline schedules: the order in which one stage runs the forward and backward passes of a
// step's micro-batches. GPipe (Huang et al. 2019): every forward, then every backward. 1F1B
// (PipeDream-Flush, Narayanan et al. 2021; Megatron-LM's non-interleaved schedule): stage s of p
// runs min(p - s - 1, m) warm-up forwards, then alternates one forward and one backward, then
// drains the remaining backwards, so it never holds more than p - s micro-batches' activations.
#pragma once
#include <vector>

#include "strategies/strategy.h"

namespace dts {

struct PipelineOp {
  bool forward = true;
  int microbatch = 0;
};

// Stage `stage` of `stages`, `microbatches` micro-batches. Backwards run in micro-batch order in
// both schedules, so gradients accumulate in the same order as one process's accumulation.
std::vector<PipelineOp> pipeline_schedule(PipelineSchedule schedule, int stages, int stage, int microbatches);

// (p - 1) / (m + p - 1): the idle share of a step when every stage takes the same time per
// micro-batch and communication is free (GPipe paper; the same for 1F1B).
double bubble_fraction_theory(int stages, int microbatches);

// The most micro-batches whose activations stage `stage` holds at once: m for GPipe, min(m, p - s)
// for 1F1B.
int microbatches_in_flight_theory(PipelineSchedule schedule, int stages, int stage, int microbatches);

}  // namespace dts

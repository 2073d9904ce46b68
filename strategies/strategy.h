// The Strategy interface: one way of spreading a training step over ranks. Every strategy
// starts from the same Philox-initialized parameters, sees the same global batches, and must end
// with the parameters the single-process reference (single/) would have.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "strategies/single/single_trainer.h"
#include "strategies/workload.h"

namespace dts {

// Per step, per rank. Times in seconds; bytes in bytes.
struct StepReport {
  double loss = 0;               // mean loss over the global batch, before the update
  double step_time = 0;          // wall time of the whole step
  double compute_time = 0;       // forward, backward, optimizer
  double comm_time = 0;          // from the first collective launched to the last one completed
  double exposed_comm_time = 0;  // time spent only waiting for communication (not hidden by compute)
  int64_t bytes_sent = 0;        // see each strategy for how it is counted
};

// Bytes this rank holds.
struct MemoryReport {
  int64_t params = 0, grads = 0, optimizer = 0, activations_peak = 0;
};

struct ParallelConfig {
  TrainConfig train;
  size_t bucket_bytes = size_t{25} << 20;  // DDP gradient buckets (PyTorch's default, 25 MiB)
  int accumulation_steps = 1;              // micro-batches per step; communication on the last only
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string_view name() const = 0;
  virtual StepReport step(const Batch& global_batch) = 0;  // collective: every rank, same batch
  virtual std::vector<double> full_parameters() = 0;        // reference layout (collective)
  virtual MemoryReport memory() const = 0;
};

// Rows [first, first + count) of `batch` as a batch of their own.
Batch slice_batch(const Batch& batch, int64_t first, int64_t count);
// Rows of part `part` of `parts` when `rows` are split as evenly as possible (the first
// rows % parts parts get one more): returns {first row, row count}.
std::pair<int64_t, int64_t> even_split(int64_t rows, int parts, int part);

}  // namespace dts

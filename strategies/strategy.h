// The Strategy interface: one way of spreading a training step over ranks. Every strategy
// starts from the same Philox-initialized parameters, sees the same global batches, and must end
// with the parameters the single-process reference (single/) would have.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"

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
  // Wire bytes this rank sends per step under the ring model of each collective (all_reduce of c
  // elements: 2 c (N-1)/N; reduce_scatter / all_gather of N x S: (N-1) S); gradients and
  // parameters only, not the one-element loss all_reduce.
  int64_t bytes_sent = 0;
  int64_t collectives = 0;       // gradient / parameter collectives launched this step
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
  // A hash of everything every rank should hold bit for bit alike. Default: the full parameters.
  // Replicated strategies add gradients and optimizer state, where a corruption too small to
  // change any parameter's rounding still shows (a flipped low bit of one gradient element).
  virtual uint64_t replicated_state_digest() { return digest_of(full_parameters()); }

 protected:
  template <class T>
  static uint64_t digest_of(const std::vector<T>& values, uint64_t seed = 0xcbf29ce484222325ull) {
    // FNV-1a over the bytes: any differing bit changes the digest (collisions are irrelevant for
    // replicas that are either identical or corrupted by a fault).
    uint64_t h = seed;
    const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
    for (size_t i = 0; i < values.size() * sizeof(T); ++i) {
      h ^= bytes[i];
      h *= 0x100000001b3ull;
    }
    return h;
  }
};

// Strategies register by name beside their definition (DTS_REGISTER_STRATEGY); each is built in
// f32, f64, or bf16 compute with f32 master weights (the reference runs all three) over a
// communicator of the ranks that train together.
enum class Precision { f32, f64, bf16 };
inline MlpCompute compute_of(Precision precision) {
  return precision == Precision::bf16 ? MlpCompute::bf16 : MlpCompute::native;
}
using StrategyFactory = std::function<std::unique_ptr<Strategy>(const ModelSpec&, const ParallelConfig&,
                                                                Communicator&, Precision)>;
bool register_strategy(std::string name, StrategyFactory factory);
std::vector<std::string> registered_strategies();
// Error{invalid_argument} naming the known strategies when `name` is not one.
std::unique_ptr<Strategy> make_strategy(std::string_view name, const ModelSpec& spec, const ParallelConfig& config,
                                        Communicator& comm, Precision precision = Precision::f32);

#define DTS_REGISTER_STRATEGY(NAME, FACTORY)                                          \
  static const bool DTS_REGISTER_CONCAT(dts_strategy_registered_, __LINE__) = \
      ::dts::register_strategy(NAME, FACTORY)

// The DType of a strategy's element type (f32 or f64), for its collectives.
template <class T>
constexpr DType dtype_of() {
  return sizeof(T) == 4 ? DType::f32 : DType::f64;
}

// Seconds since `start` on the steady clock (step reports).
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The global batch's mean loss from each rank's sum of (shard mean loss x shard rows): one
// all_reduce of a double over `comm` (collective).
double global_mean_loss(Communicator& comm, double local_loss_sum, int64_t global_rows);

// Rows [first, first + count) of `batch` as a batch of their own.
Batch slice_batch(const Batch& batch, int64_t first, int64_t count);
// Rows of part `part` of `parts` when `rows` are split as evenly as possible (the first
// rows % parts parts get one more): returns {first row, row count}.
std::pair<int64_t, int64_t> even_split(int64_t rows, int parts, int part);

}  // namespace dts

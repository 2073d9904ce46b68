// The dp x tp x pp step (hybrid_strategy.h). Sends are non-blocking (their buffers live until the
// end of the schedule), receives block: in both schedules every receive's data is produced by an
// operation that does not wait for the receiver, so the step cannot deadlock, and the time a stage
// spends blocked in a receive is exactly its idle time (the bubble).
#include "strategies/hybrid/hybrid_strategy.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <type_traits>

#include "core/error.h"

namespace dts {

namespace {

// A send in flight and the array it reads (moving an array keeps its allocation): the activation
// itself on a T wire, its bf16 bits on a bf16 wire. The data is declared first so it is destroyed
// last: destroying a Work in flight waits for it, and the send still reads the buffer until then.
template <class T>
struct PendingSend {
  kernels::Array<T> values;
  kernels::Array<uint16_t> bf16;
  std::unique_ptr<Work> work;
};

// Micro-batch rows of this dp replica: {first row in the global batch, rows} for each j.
std::vector<std::pair<int64_t, int64_t>> microbatch_rows(int64_t batch, const ParallelConfig& c, int dp_index) {
  const auto [replica_first, replica_rows] = even_split(batch, c.dp, dp_index);
  std::vector<std::pair<int64_t, int64_t>> rows;
  for (int j = 0; j < c.microbatches; ++j) {
    const auto [first, count] = even_split(replica_rows, c.microbatches, j);
    rows.emplace_back(replica_first + first, count);
  }
  return rows;
}

// The world rank of (pp, dp, tp) under the layout's numbering (tp innermost, then dp, then pp).
int world_rank(const ParallelConfig& c, int pp, int dp, int tp) { return (pp * c.dp + dp) * c.tp + tp; }

std::string bytes_text(double elements, size_t element) {
  return std::to_string(static_cast<int64_t>(elements)) + " elements x " + std::to_string(element) + " bytes";
}

}  // namespace

std::vector<PlannedCall> hybrid_calls(const ModelSpec& spec, const ParallelConfig& c, int stage, int tp_index,
                                      int dp_index, int64_t batch, DType dtype, DType wire) {
  const std::vector<int> bounds = balanced_stages(spec, c.pp);
  const StageLayout layout = stage_layout(spec, bounds[static_cast<size_t>(stage)],
                                          bounds[static_cast<size_t>(stage) + 1], c.tp, tp_index, /*with_runs=*/false);
  const auto element = static_cast<int64_t>(size_of(dtype));
  std::vector<PlannedCall> calls;
  const auto call = [&](const char* group, const char* collective, int n, int64_t bytes, DType type) {
    PlannedCall planned;
    planned.group = group;
    planned.collective = collective;
    planned.dtype = type;
    planned.group_size = n;
    planned.bytes = bytes;
    calls.push_back(planned);
  };
  const int me = world_rank(c, stage, dp_index, tp_index);
  const bool first_stage = stage == 0, last_stage = stage == c.pp - 1;
  for (const auto& [first, rows] : microbatch_rows(batch, c, dp_index)) {
    (void)first;
    const auto wire_bytes = static_cast<int64_t>(size_of(wire));
    if (!last_stage) {
      calls.push_back(message_call("pp", wire, rows * layout.layers.back().out_local * wire_bytes, me,
                                   world_rank(c, stage + 1, dp_index, tp_index)));
    }
    if (!first_stage) {
      calls.push_back(message_call("pp", wire, rows * layout.layers.front().in_local * wire_bytes, me,
                                   world_rank(c, stage - 1, dp_index, tp_index)));
    }
    if (c.tp == 1) continue;
    for (const LocalLayer& layer : layout.layers) {
      if (layer.split == LayerSplit::row) call("tp", "all_reduce", c.tp, rows * layer.out * element, dtype);
    }
    for (const LocalLayer& layer : layout.layers) {
      if (layer.split == LayerSplit::column && layer.index > 0) {
        call("tp", "all_reduce", c.tp, rows * layer.in * element, dtype);
      }
    }
  }
  const int64_t replicated = layout.replicated;
  for (const int64_t length : {replicated, layout.count - replicated}) {
    if (length == 0 || c.dp == 1) continue;
    if (c.zero == 1) {
      const int64_t slot = (length + c.dp - 1) / c.dp;
      call("dp", "reduce_scatter", c.dp, c.dp * slot * element, dtype);
      call("dp", "all_gather", c.dp, c.dp * slot * element, dtype);
    } else {
      call("dp", "all_reduce", c.dp, length * element, dtype);
    }
  }
  calls.push_back(loss_call("world", c.dp * c.tp * c.pp));
  return calls;
}

template <class T>
HybridStrategy<T>::HybridStrategy(std::string name, const ModelSpec& spec, const ParallelConfig& config,
                                  ProcessGroups& groups, MlpCompute compute)
    : name_(std::move(name)), spec_(spec), config_(config), groups_(groups),
      compute_(compute), bounds_(balanced_stages(spec, config.pp)),
      mlp_(spec, bounds_[static_cast<size_t>(groups.pp_index)], bounds_[static_cast<size_t>(groups.pp_index) + 1],
           config.tp, groups.tp_index, groups.tp.get(), compute, groups.world->memory()),
      params_(groups.world->memory()), grads_(groups.world->memory()), micro_grads_(groups.world->memory()),
      state1_(groups.world->memory()), state2_(groups.world->memory()), labels_(groups.world->memory()) {
  if (config.microbatches < 1) throw Error(Error::Kind::invalid_argument, name_ + ": micro-batches must be >= 1");
  if (config.zero != 0 && config.zero != 1) {
    throw Error(Error::Kind::invalid_argument, name_ + ": only ZeRO stage 1 combines with tp and pp");
  }
  const std::vector<T> initial = mlp_.initial_parameters();
  const auto count = static_cast<int64_t>(initial.size());
  params_.resize(count);
  params_.upload(initial.data(), count);
  const auto zeroed = [&](kernels::Array<T>& a, int64_t size) {
    a.resize(size);
    table().zero(a.data(), size);
  };
  zeroed(grads_, count);
  if (config.microbatches > 1) zeroed(micro_grads_, count);
  int64_t optimizer_elements = count;
  const int64_t replicated = mlp_.layout().replicated;
  for (const auto& [begin, length] : {std::pair<int64_t, int64_t>{0, replicated},
                                      std::pair<int64_t, int64_t>{replicated, count - replicated}}) {
    if (length == 0) continue;
    DpBlock block{begin, length};
    if (config.zero == 1) {
      const int n = config.dp;
      block.slot = (length + n - 1) / n;
      std::tie(block.first, block.count) = even_split(length, n, groups.dp_index);
      block.state_offset = dp_blocks_.empty() ? 0 : dp_blocks_.back().state_offset + dp_blocks_.back().slot;
    }
    dp_blocks_.push_back(block);
  }
  if (config.zero == 1) optimizer_elements = dp_blocks_.back().state_offset + dp_blocks_.back().slot;
  zeroed(state1_, optimizer_elements);
  if (config.train.optimizer == OptimizerKind::adamw) zeroed(state2_, optimizer_elements);
  table().synchronize();
}

template <class T>
template <class Collective>
void HybridStrategy<T>::communicate(Communicator& comm, StepReport& report, double bytes, Collective&& collective) {
  table().synchronize();  // the kernels' results are in memory before the communicator's stream reads them
  blocking_collective(report, bytes, [&] {
    collective();
    // and the collective's are in memory before the next kernel reads them
    if (table().memory() == Memory::device) comm.synchronize();
  });
}

template <class T>
StepReport HybridStrategy<T>::step(const Batch& batch) {
  const ParallelConfig& c = config_;
  if (batch.size < static_cast<int64_t>(c.dp) * c.microbatches) {
    throw Error(Error::Kind::invalid_argument, name_ + ": a global batch of " + std::to_string(batch.size) +
                                                   " rows gives some of dp=" + std::to_string(c.dp) + " x mb=" +
                                                   std::to_string(c.microbatches) + " micro-batches no row");
  }
  const auto step_start = std::chrono::steady_clock::now();
  StepReport report;
  last_batch_rows_ = batch.size;
  const int stage = groups_.pp_index, stages = c.pp;
  const auto rows = microbatch_rows(batch.size, c, groups_.dp_index);
  Communicator* const pp = groups_.pp.get();  // null with one stage, which sends nothing

  const kernels::KernelTable<T>& kt = table();
  const Memory where = kt.memory();
  std::map<int, SavedActivations<T>> saved;  // micro-batches whose backward is still to come
  std::vector<PendingSend<T>> sends;
  int64_t saved_bytes = 0;
  double loss_sum = 0;
  // The labels where the last stage's kernels read them.
  const int32_t* labels = batch.labels.data();
  if (where != Memory::host && mlp_.last_stage()) {
    labels_.resize(batch.size);
    labels_.upload(batch.labels.data(), batch.size);
    labels = labels_.data();
  }
  // Activations and their gradients cross stages in the compute precision: bf16 compute sends
  // bf16 (its values are bf16 already, so the conversion is exact and half the bytes travel).
  const DType wire = wire_dtype();
  const size_t wire_size = size_of(wire);
  // What crosses a link, folded into `digest` (the device's bytes read back for it).
  const auto fold = [](const auto& array, uint64_t& digest) { digest = array_digest(array, array.size(), digest); };
  const auto send = [&](kernels::Array<T> values, int peer) {
    PendingSend<T> pending{std::move(values), kernels::Array<uint16_t>(where), nullptr};
    const int64_t count = pending.values.size();
    const void* data = pending.values.data();
    if (wire == DType::bf16) {
      pending.bf16.resize(count);
      kt.cast_to_bf16(pending.values.data(), pending.bf16.data(), count);
      data = pending.bf16.data();
    }
    kt.synchronize();  // the values are in memory before the communicator's stream reads them
    uint64_t& digest = peer > stage ? sent_forward_ : sent_backward_;
    if (wire == DType::bf16) {
      fold(pending.bf16, digest);
    } else {
      fold(pending.values, digest);
    }
    pending.work = pp->isend(data, static_cast<size_t>(count), wire, peer);
    report.bytes_sent += count * static_cast<int64_t>(wire_size);
    sends.push_back(std::move(pending));
  };
  kernels::Array<uint16_t> received_bf16(where);
  const auto receive = [&](int64_t count, int peer) {
    kernels::Array<T> values = mlp_.array(count);
    if (wire == DType::bf16) received_bf16.resize(count);
    void* data = wire == DType::bf16 ? static_cast<void*>(received_bf16.data()) : static_cast<void*>(values.data());
    kt.synchronize();  // no kernel still reads what the receive overwrites
    const auto wait_start = std::chrono::steady_clock::now();
    pp->recv(data, static_cast<size_t>(count), wire, peer);
    if (where == Memory::device) pp->synchronize();  // received before a kernel reads it
    report.idle_time += seconds_since(wait_start);
    uint64_t& digest = peer < stage ? received_forward_ : received_backward_;
    if (wire == DType::bf16) {
      fold(received_bf16, digest);
    } else {
      fold(values, digest);
    }
    if (wire == DType::bf16) kt.cast_from_bf16(received_bf16.data(), values.data(), count);
    return values;
  };
  // Completed sends give their arrays back to the stage's pool.
  const auto retire = [&](PendingSend<T>& pending) {
    mlp_.recycle(std::move(pending.values));
    return true;
  };

  const auto pipeline_start = std::chrono::steady_clock::now();
  for (const PipelineOp& op : pipeline_schedule(c.schedule, stages, stage, c.microbatches)) {
    // Completed sends give their buffers back as the schedule goes, so a 1F1B stage does not keep
    // every micro-batch's output until the end of the step.
    std::erase_if(sends, [&](PendingSend<T>& pending) { return pending.work->test() && retire(pending); });
    const auto [first, count] = rows[static_cast<size_t>(op.microbatch)];
    if (op.forward) {
      kernels::Array<T> input(where);
      if (mlp_.first_stage()) {
        const Batch micro = slice_batch(batch, first, count);
        const std::vector<T> features(micro.x.begin(), micro.x.end());
        input = mlp_.array(static_cast<int64_t>(features.size()));
        input.upload(features.data(), input.size());
      } else {
        input = receive(count * mlp_.input_width(), stage - 1);
      }
      SavedActivations<T>& kept = saved[op.microbatch];
      double loss = 0;
      kernels::Array<T> output =
          mlp_.forward(params_.data(), std::move(input), count, labels + first, kept, loss, report);
      saved_bytes += kept.bytes();
      memory_.activations_peak = std::max(memory_.activations_peak, saved_bytes);
      memory_.microbatches_in_flight_peak =
          std::max(memory_.microbatches_in_flight_peak, static_cast<int64_t>(saved.size()));
      memory_.activation_bytes_per_microbatch = std::max(memory_.activation_bytes_per_microbatch, kept.bytes());
      if (mlp_.last_stage()) {
        if (groups_.tp_index == 0) loss_sum += loss * static_cast<double>(count);
      } else {
        send(std::move(output), stage + 1);
      }
    } else {
      kernels::Array<T> upstream(where);
      if (!mlp_.last_stage()) upstream = receive(count * mlp_.output_width(), stage + 1);
      // Micro-batch 0 writes the gradient, later ones add to it in order (one process's
      // accumulation order, so a pure pipeline matches it bit for bit).
      T* target = op.microbatch == 0 ? grads_.data() : micro_grads_.data();
      const double scale = static_cast<double>(count) / static_cast<double>(batch.size);
      auto node = saved.extract(op.microbatch);
      const int64_t kept_bytes = node.mapped().bytes();
      kernels::Array<T> input_gradient =
          mlp_.backward(params_.data(), target, node.mapped(), std::move(upstream), scale, report);
      saved_bytes -= kept_bytes;
      if (op.microbatch > 0) kt.add(grads_.data(), micro_grads_.data(), grads_.size());
      if (!mlp_.first_stage()) send(std::move(input_gradient), stage - 1);
    }
  }
  for (auto& pending : sends) {
    const auto wait_start = std::chrono::steady_clock::now();
    pending.work->wait();  // a hang here is the harness watchdog's to report
    report.idle_time += seconds_since(wait_start);
    retire(pending);
  }
  sends.clear();
  report.pipeline_time = seconds_since(pipeline_start);

  const size_t element = sizeof(T);
  if (c.zero == 1) {
    zero1_update(report);
  } else {
    for (const DpBlock& block : c.dp > 1 ? dp_blocks_ : std::vector<DpBlock>{}) {
      const double bytes = 2.0 * static_cast<double>(block.length) * static_cast<double>(element) * (c.dp - 1) / c.dp;
      T* data = grads_.data() + block.begin;
      communicate(*groups_.dp, report, bytes, [&] {
        groups_.dp->all_reduce(data, data, static_cast<size_t>(block.length), dtype_of<T>(), ReduceOp::sum);
      });
    }
    const auto optimizer_start = std::chrono::steady_clock::now();
    ++steps_;
    optimizer_step(kt, c.train, params_.data(), grads_.data(), state1_.data(),
                   state2_.empty() ? nullptr : state2_.data(), params_.size(), steps_);
    kt.synchronize();  // compute time is the device's, not the launches'
    report.compute_time += seconds_since(optimizer_start);
  }
  report.loss = global_mean_loss(*groups_.world, loss_sum, batch.size);
  report.step_time = seconds_since(step_start);
  return report;
}

template <class T>
void HybridStrategy<T>::zero1_update(StepReport& report) {
  const int n = config_.dp, rank = groups_.dp_index;
  const auto dtype = dtype_of<T>();
  const kernels::KernelTable<T>& kt = table();
  kernels::Array<T> padded(kt.memory());
  // Each block padded to n slots on the wire (as strategies/zero/), so every slot has one size.
  for (const DpBlock& b : dp_blocks_) {
    const double wire = static_cast<double>((n - 1) * b.slot * static_cast<int64_t>(sizeof(T)));
    padded.resize(n * b.slot);
    pad_shards(kt, grads_.data() + b.begin, b.length, n, b.slot, padded.data());
    T* slot = padded.data() + rank * b.slot;
    communicate(*groups_.dp, report, wire, [&] {
      groups_.dp->reduce_scatter(padded.data(), slot, static_cast<size_t>(b.slot), dtype, ReduceOp::sum);
    });
    kt.copy(grads_.data() + b.begin + b.first, slot, b.count);
  }

  const auto optimizer_start = std::chrono::steady_clock::now();
  ++steps_;
  for (const DpBlock& b : dp_blocks_) {
    optimizer_step(kt, config_.train, params_.data() + b.begin + b.first, grads_.data() + b.begin + b.first,
                   state1_.data() + b.state_offset, state2_.empty() ? nullptr : state2_.data() + b.state_offset,
                   b.count, steps_);
  }
  kt.synchronize();  // compute time is the device's, not the launches'
  report.compute_time += seconds_since(optimizer_start);

  for (const DpBlock& b : dp_blocks_) {
    const double wire = static_cast<double>((n - 1) * b.slot * static_cast<int64_t>(sizeof(T)));
    padded.resize(n * b.slot);
    pad_shards(kt, params_.data() + b.begin, b.length, n, b.slot, padded.data());
    T* slot = padded.data() + rank * b.slot;
    communicate(*groups_.dp, report, wire, [&] {
      groups_.dp->all_gather(slot, padded.data(), static_cast<size_t>(b.slot), dtype);
    });
    unpad_shards(kt, padded.data(), b.length, n, b.slot, params_.data() + b.begin);
  }
  kt.synchronize();
}

template <class T>
std::vector<double> HybridStrategy<T>::full_parameters() {
  const ParallelConfig& c = config_;
  // Every element of the model has one owner: the dp-0 replica's rank holding it, and for tensors
  // replicated across tp its tp-0 rank. Each rank sends its owned elements in one all_gather of
  // equal blocks; every rank knows every rank's layout, so it unpacks without more messages.
  const auto owned = [&](int pp, int dp, int tp) {
    std::vector<ParameterRun> runs;
    if (dp != 0) return runs;
    for (const ParameterRun& run : stage_layout(spec_, bounds_[static_cast<size_t>(pp)],
                                                bounds_[static_cast<size_t>(pp) + 1], c.tp, tp).runs) {
      if (!run.replicated || tp == 0) runs.push_back(run);
    }
    return runs;
  };
  std::vector<std::vector<ParameterRun>> runs_of(static_cast<size_t>(c.world()));
  int64_t block = 0;
  for (int pp = 0; pp < c.pp; ++pp) {
    for (int dp = 0; dp < c.dp; ++dp) {
      for (int tp = 0; tp < c.tp; ++tp) {
        auto& runs = runs_of[static_cast<size_t>(world_rank(c, pp, dp, tp))];
        runs = owned(pp, dp, tp);
        int64_t count = 0;
        for (const auto& run : runs) count += run.length;
        block = std::max(block, count);
      }
    }
  }
  const std::vector<T> params = params_.download();
  std::vector<T> mine(static_cast<size_t>(block), T(0));
  int64_t at = 0;
  for (const auto& run : runs_of[static_cast<size_t>(groups_.world->rank())]) {
    std::copy(params.begin() + run.local, params.begin() + run.local + run.length, mine.begin() + at);
    at += run.length;
  }
  // Through the communicator's memory: the device's, on a device backend.
  const Memory where = table().memory();
  kernels::Array<T> sent(where, block), gathered(where, block * c.world());
  sent.upload(mine.data(), block);
  groups_.world->all_gather(sent.data(), gathered.data(), static_cast<size_t>(block), dtype_of<T>());
  if (where == Memory::device) groups_.world->synchronize();
  const std::vector<T> all = gathered.download();
  std::vector<double> full(static_cast<size_t>(parameter_count(spec_)));
  for (int r = 0; r < c.world(); ++r) {
    at = r * block;
    for (const auto& run : runs_of[static_cast<size_t>(r)]) {
      std::copy(all.begin() + at, all.begin() + at + run.length, full.begin() + run.reference);
      at += run.length;
    }
  }
  return full;
}

template <class T>
MemoryReport HybridStrategy<T>::memory() const {
  MemoryReport report = memory_;
  report.params = params_.bytes();
  report.grads = grads_.bytes() + micro_grads_.bytes();
  report.optimizer = state1_.bytes() + state2_.bytes();
  return report;
}

template <class T>
std::vector<TrafficTheory> HybridStrategy<T>::expected_traffic() const {
  const ParallelConfig& c = config_;
  const size_t element = sizeof(T);
  const std::vector<PlannedCall> calls = hybrid_calls(spec_, c, groups_.pp_index, groups_.tp_index, groups_.dp_index,
                                                      last_batch_rows_, dtype_of<T>(), wire_dtype());
  std::vector<TrafficTheory> theory;
  const auto rows = microbatch_rows(last_batch_rows_, c, groups_.dp_index);
  int64_t replica_rows = 0;
  for (const auto& [first, count] : rows) replica_rows += count;
  if (c.pp > 1) {
    // Exact: each micro-batch's activation forward (not from the last stage) and its input
    // gradient back (not from the first).
    const int64_t width = (mlp_.last_stage() ? 0 : mlp_.output_width()) + (mlp_.first_stage() ? 0 : mlp_.input_width());
    theory.push_back({"pp", bytes_sent(calls, "pp"), 0,
                      "rows x (output width + input width) = " + std::to_string(replica_rows) + " x " +
                          std::to_string(width) + " x " + std::to_string(size_of(wire_dtype()))});
  }
  // tp: per micro-batch an all_reduce of rows x out per row-parallel layer (forward) and of rows x
  // in per column-parallel layer other than the model's first (backward); ring model 2c(t-1)/t,
  // uneven ring segments off by at most t elements per all_reduce.
  int64_t per_row = 0, reductions = 0;
  for (const LocalLayer& layer : mlp_.layout().layers) {
    if (layer.split == LayerSplit::row) per_row += layer.out, ++reductions;
    if (layer.split == LayerSplit::column && layer.index > 0) per_row += layer.in, ++reductions;
  }
  if (c.tp > 1 && reductions > 0) {
    const double elements = 2.0 * static_cast<double>(replica_rows * per_row) * (c.tp - 1) / c.tp;
    theory.push_back({"tp", bytes_sent(calls, "tp"),
                      static_cast<double>(reductions * c.microbatches * c.tp * static_cast<int64_t>(element)),
                      "2 x rows x " + std::to_string(per_row) + " x (t-1)/t: " + bytes_text(elements, element)});
  }
  if (c.dp > 1) {
    // One collective (or, with ZeRO-1, a reduce_scatter and an all_gather) per block: the
    // replicated tensors and the shards (StageLayout).
    double slack = 0;
    std::string parts;
    for (const DpBlock& b : dp_blocks_) {
      if (c.zero != 1) slack += static_cast<double>(c.dp) * static_cast<double>(element);  // uneven ring segments
      parts += (parts.empty() ? "" : " + ") + std::to_string(c.zero == 1 ? b.slot : b.length);
    }
    const double sent = bytes_sent(calls, "dp");
    theory.push_back({"dp", sent, slack,
                      (c.zero == 1 ? "ZeRO-1: 2 x (d-1) x S per block (S = " : "2 x Psi x (d-1)/d per block (Psi = ") +
                          parts + "): " + bytes_text(sent / static_cast<double>(element), element)});
  }
  return theory;
}

template <class T>
std::vector<ReplicaDigest> HybridStrategy<T>::replica_digests() {
  const std::string where = "stage " + std::to_string(groups_.pp_index);
  std::vector<ReplicaDigest> digests;
  // Read back from the communicator's memory.
  const std::vector<T> params = params_.download(), grads = grads_.download();
  // A stage shard and (without ZeRO, where they are summed alike) its gradient and optimizer state.
  uint64_t shard = digest_of(params);
  if (config_.zero == 0) shard = digest_of(state2_.download(), digest_of(state1_.download(), digest_of(grads, shard)));
  digests.push_back({where + " tp rank " + std::to_string(groups_.tp_index) + " (alike across dp)", shard});
  if (config_.tp > 1) {
    uint64_t replicated = kFnvOffsetBasis;
    for (const ParameterRun& run : mlp_.layout().runs) {
      if (!run.replicated) continue;
      replicated = digest_of(params.data() + run.local, static_cast<size_t>(run.length), replicated);
      // Without ZeRO the gradient is summed alike everywhere; ZeRO-1 leaves each rank only its
      // own shard summed, and shards follow each rank's (uneven) layout, so only parameters.
      if (config_.zero == 0) {
        replicated = digest_of(grads.data() + run.local, static_cast<size_t>(run.length), replicated);
      }
    }
    digests.push_back({where + " replicated tensors (alike across tp and dp)", replicated});
    digests.push_back({where + " dp replica " + std::to_string(groups_.dp_index) + " tp all_reduce results (alike across tp)",
                       mlp_.tp_results_digest()});
  }
  // Each pipeline link as both of its ends saw it.
  const int stage = groups_.pp_index;
  const std::string rank = " (dp replica " + std::to_string(groups_.dp_index) + ", tp rank " +
                           std::to_string(groups_.tp_index) + "; alike at both ends)";
  const auto link = [&](const char* what, int from, int to) {
    return "stage " + std::to_string(from) + "->" + std::to_string(to) + " " + what + rank;
  };
  if (!mlp_.last_stage()) {
    digests.push_back({link("activations", stage, stage + 1), sent_forward_});
    digests.push_back({link("input gradients", stage + 1, stage), received_backward_});
  }
  if (!mlp_.first_stage()) {
    digests.push_back({link("activations", stage - 1, stage), received_forward_});
    digests.push_back({link("input gradients", stage, stage - 1), sent_backward_});
  }
  return digests;
}

template class HybridStrategy<float>;
template class HybridStrategy<double>;

namespace {

// Host and device alike: the class takes the memory of its communicators (check_strategy has
// refused f64 on the device).
StrategyFactory hybrid_factory(std::string name) {
  return [name](const ModelSpec& spec, const ParallelConfig& config, ProcessGroups& groups,
                Precision precision) -> std::unique_ptr<Strategy> {
    if (precision == Precision::f64) return std::make_unique<HybridStrategy<double>>(name, spec, config, groups);
    return std::make_unique<HybridStrategy<float>>(name, spec, config, groups, compute_of(precision));
  };
}

StrategyTraits traits(const char* summary, bool dp, bool tp, bool pp, PipelineSchedule schedule, int dimensions = 0) {
  StrategyTraits t{summary, dp, tp, pp};
  t.zero1_option = dp;
  t.schedule = schedule;
  t.min_parallel_dimensions = dimensions;
  return t;
}

}  // namespace

DTS_REGISTER_STRATEGY("tp",
                      traits("tensor parallel (Megatron column/row MLP)", false, true, false, PipelineSchedule::none),
                      hybrid_factory("tp"));
DTS_REGISTER_STRATEGY("gpipe",
                      traits("pipeline parallel, GPipe schedule", false, false, true, PipelineSchedule::gpipe),
                      hybrid_factory("gpipe"));
DTS_REGISTER_STRATEGY("1f1b",
                      traits("pipeline parallel, 1F1B schedule", false, false, true, PipelineSchedule::one_f_one_b),
                      hybrid_factory("1f1b"));
DTS_REGISTER_STRATEGY("hybrid",
                      traits("dp x tp x pp (1F1B), optionally ZeRO-1 across dp", true, true, true,
                             PipelineSchedule::one_f_one_b, 2),
                      hybrid_factory("hybrid"));

DTS_REGISTER_DEVICE_STRATEGY("tp", hybrid_factory("tp"));
DTS_REGISTER_DEVICE_STRATEGY("gpipe", hybrid_factory("gpipe"));
DTS_REGISTER_DEVICE_STRATEGY("1f1b", hybrid_factory("1f1b"));
DTS_REGISTER_DEVICE_STRATEGY("hybrid", hybrid_factory("hybrid"));

}  // namespace dts

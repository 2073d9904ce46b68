// The stage / tensor-parallel MLP engine (parallel_mlp.h). With tp = 1 and every layer, each
// operation is the very call Mlp (strategies/mlp.cpp) makes, in the same order, so a pipeline
// computes each micro-batch bit for bit as one process does; with tp > 1 only the sums that cross
// the tp group (the row-parallel output, the column-parallel input gradient) change order. In bf16
// mode those partial sums travel and add in f32 and are rounded once, after the bias epilogue, as
// the reference rounds its one matmul output.
#include "strategies/tensor/parallel_mlp.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <string>
#include <type_traits>

#include "core/error.h"

namespace dts {

std::vector<LayerSplit> layer_splits(int layers, int tp) {
  std::vector<LayerSplit> splits(static_cast<size_t>(layers), LayerSplit::replicated);
  if (tp == 1) return splits;
  for (int l = 0; l + 1 < layers; l += 2) {
    splits[static_cast<size_t>(l)] = LayerSplit::column;
    splits[static_cast<size_t>(l) + 1] = LayerSplit::row;
  }
  return splits;
}

int64_t tensor_parallel_reordered_terms(const ModelSpec& spec, int tp) {
  const std::vector<int64_t> dims = layer_dims(spec);
  const std::vector<LayerSplit> splits = layer_splits(spec.layers, tp);
  int64_t terms = 0;
  for (size_t l = 0; l < splits.size(); ++l) {
    if (splits[l] == LayerSplit::row) terms += dims[l] - 1;
    if (splits[l] == LayerSplit::column && l > 0) terms += dims[l + 1] - 1;
  }
  return terms;
}

StageLayout stage_layout(const ModelSpec& spec, int first, int end, int tp, int tp_rank, bool with_runs) {
  if (first < 0 || end > spec.layers || first >= end) {
    throw Error(Error::Kind::invalid_argument, "stage_layout: bad layer range");
  }
  const std::vector<int64_t> dims = layer_dims(spec);
  const std::vector<ParameterInfo> reference = parameter_layout(spec);
  const std::vector<LayerSplit> splits = layer_splits(spec.layers, tp);
  StageLayout layout;
  int64_t offset = 0;
  const auto add_run = [&](int64_t reference_first, int64_t length, bool replicated) {
    if (length > 0 && with_runs) layout.runs.push_back({offset, reference_first, length, replicated});
    if (!with_runs && replicated) layout.replicated += length;
    offset += length;
  };
  for (int l = first; l < end; ++l) {
    const auto ul = static_cast<size_t>(l);
    LocalLayer layer;
    layer.index = l;
    layer.split = splits[ul];
    layer.in = layer.in_local = dims[ul];
    layer.out = layer.out_local = dims[ul + 1];
    const int64_t w = reference[2 * ul].offset, b = reference[2 * ul + 1].offset;
    if (layer.split != LayerSplit::replicated && (layer.split == LayerSplit::column ? layer.out : layer.in) < tp) {
      throw Error(Error::Kind::invalid_argument,
                  "tensor parallel: layer " + std::to_string(l) + " has " +
                      std::to_string(layer.split == LayerSplit::column ? layer.out : layer.in) +
                      " features to split, fewer than tp=" + std::to_string(tp));
    }
    layer.weight = offset;
    if (layer.split == LayerSplit::column) {
      std::tie(layer.out_first, layer.out_local) = even_split(layer.out, tp, tp_rank);
      add_run(w + layer.out_first * layer.in, layer.out_local * layer.in, false);
      layer.bias = offset;
      add_run(b + layer.out_first, layer.out_local, false);
    } else if (layer.split == LayerSplit::row) {
      std::tie(layer.in_first, layer.in_local) = even_split(layer.in, tp, tp_rank);
      // Stored compact (out x in_local): one run per output row.
      if (!with_runs) offset += layer.out * layer.in_local;
      for (int64_t o = 0; with_runs && o < layer.out; ++o) add_run(w + o * layer.in + layer.in_first, layer.in_local, false);
      layer.bias = offset;
      add_run(b, layer.out, true);  // added once, after the all_reduce: replicated
    } else {
      add_run(w, layer.out * layer.in, tp > 1);
      layer.bias = offset;
      add_run(b, layer.out, tp > 1);
    }
    layout.layers.push_back(layer);
  }
  layout.count = offset;
  if (!with_runs) return layout;  // no runs to move: the layers' weight and bias offsets unmoved
  // Move the replicated runs to the front, keeping the order within each block: a tensor's runs
  // share one flag and are consecutive, so every tensor stays contiguous.
  std::map<int64_t, int64_t> moved;
  for (const ParameterRun& run : layout.runs) layout.replicated += run.replicated ? run.length : 0;
  int64_t next_replicated = 0, next_sharded = layout.replicated;
  for (ParameterRun& run : layout.runs) {
    int64_t& next = run.replicated ? next_replicated : next_sharded;
    moved[run.local] = next;
    run.local = next;
    next += run.length;
  }
  for (LocalLayer& layer : layout.layers) {
    layer.weight = moved.at(layer.weight);
    layer.bias = moved.at(layer.bias);
  }
  return layout;
}

std::vector<int> balanced_stages(const ModelSpec& spec, int stages) {
  const int layers = spec.layers;
  if (stages < 1 || stages > layers) {
    throw Error(Error::Kind::invalid_argument, "pipeline: " + std::to_string(stages) + " stages need at least as many "
                                               "layers; the model has " + std::to_string(layers));
  }
  std::vector<int64_t> size(static_cast<size_t>(layers));
  const std::vector<ParameterInfo> reference = parameter_layout(spec);
  for (size_t l = 0; l < size.size(); ++l) size[l] = reference[2 * l].size() + reference[2 * l + 1].size();
  // best[s][l]: the smallest largest-stage size splitting layers [0, l) into s stages; a few
  // layers and stages, so the plain dynamic program is enough.
  const int64_t infinite = std::numeric_limits<int64_t>::max();
  std::vector<std::vector<int64_t>> best(static_cast<size_t>(stages) + 1,
                                         std::vector<int64_t>(static_cast<size_t>(layers) + 1, infinite));
  std::vector<std::vector<int>> cut = std::vector<std::vector<int>>(
      static_cast<size_t>(stages) + 1, std::vector<int>(static_cast<size_t>(layers) + 1, 0));
  best[0][0] = 0;
  for (int s = 1; s <= stages; ++s) {
    for (int l = s; l <= layers; ++l) {
      int64_t tail = 0;
      for (int start = l - 1; start >= s - 1; --start) {
        tail += size[static_cast<size_t>(start)];
        const int64_t before = best[static_cast<size_t>(s) - 1][static_cast<size_t>(start)];
        if (before == infinite) continue;
        const int64_t worst = std::max(before, tail);
        // <=: among equal splits, the later start (a deterministic choice).
        if (worst <= best[static_cast<size_t>(s)][static_cast<size_t>(l)]) {
          best[static_cast<size_t>(s)][static_cast<size_t>(l)] = worst;
          cut[static_cast<size_t>(s)][static_cast<size_t>(l)] = start;
        }
      }
    }
  }
  std::vector<int> bounds(static_cast<size_t>(stages) + 1);
  bounds[static_cast<size_t>(stages)] = layers;
  for (int s = stages; s > 0; --s) {
    bounds[static_cast<size_t>(s) - 1] = cut[static_cast<size_t>(s)][static_cast<size_t>(bounds[static_cast<size_t>(s)])];
  }
  return bounds;
}

template <class T>
int64_t SavedActivations<T>::bytes() const {
  int64_t total = dlogits.bytes();
  for (const auto& v : inputs) total += v.bytes();
  for (const auto& v : pre) total += v.bytes();
  return total;
}

template <class T>
ParallelMlp<T>::ParallelMlp(const ModelSpec& spec, int first_layer, int end_layer, int tp, int tp_rank,
                            Communicator* tp_comm, MlpCompute compute, Memory memory)
    : spec_(spec), first_(first_layer), end_(end_layer), tp_(tp), tp_rank_(tp_rank), tp_comm_(tp_comm),
      compute_(compute), layout_(stage_layout(spec, first_layer, end_layer, tp, tp_rank)), table_(memory),
      rounded_params_(memory), zeros_(memory) {
  if (compute_ == MlpCompute::bf16 && !std::is_same_v<T, float>) {
    throw Error(Error::Kind::invalid_argument, "bf16 compute keeps f32 master weights: use ParallelMlp<float>");
  }
  if (tp > 1 && (!tp_comm || tp_comm->size() != tp)) {
    throw Error(Error::Kind::invalid_argument, "tensor parallel: the tp group must have tp ranks");
  }
  if (tp_comm && tp > 1 && tp_comm->memory() != memory) {
    throw Error(Error::Kind::invalid_argument, "tensor parallel: the tp group's memory is not the stage's");
  }
  int64_t widest = 0;
  for (const LocalLayer& layer : layout_.layers) widest = std::max(widest, layer.out_local);
  zeros_.resize(widest);
  table_.zero(zeros_.data(), widest);
}

template <class T>
std::vector<T> ParallelMlp<T>::initial_parameters() const {
  std::vector<T> params(static_cast<size_t>(layout_.count));
  const std::vector<ParameterInfo> reference = parameter_layout(spec_);
  std::vector<double> values;
  for (const ParameterRun& run : layout_.runs) {
    // Every run lies inside one parameter tensor.
    for (const ParameterInfo& p : reference) {
      if (run.reference < p.offset || run.reference >= p.offset + p.size()) continue;
      values.resize(static_cast<size_t>(run.length));
      init_parameter(spec_, p, run.reference - p.offset, run.reference - p.offset + run.length, values.data());
      std::copy(values.begin(), values.end(), params.begin() + run.local);
      break;
    }
  }
  return params;
}

template <class T>
kernels::Array<T> ParallelMlp<T>::array(int64_t size) {
  if (pool_.empty()) return kernels::Array<T>(table_.memory(), size);
  kernels::Array<T> a = std::move(pool_.back());
  pool_.pop_back();
  a.resize(size);
  return a;
}

template <class T>
void ParallelMlp<T>::recycle(kernels::Array<T>&& a) {
  if (a.memory() != table_.memory() || a.data() == nullptr) return;  // moved from, or never allocated
  pool_.push_back(std::move(a));
}

template <class T>
void ParallelMlp<T>::release(SavedActivations<T>& saved) {
  for (auto* arrays : {&saved.inputs, &saved.pre}) {
    for (kernels::Array<T>& a : *arrays) recycle(std::move(a));
    arrays->clear();
  }
  recycle(std::move(saved.dlogits));
  saved.dlogits = kernels::Array<T>(table_.memory());
  saved.rows = 0;
}

template <class T>
void ParallelMlp<T>::round(T* v, int64_t n) const {
  if (compute_ == MlpCompute::bf16) table_.round_to_bf16(v, n);
}

template <class T>
void ParallelMlp<T>::round(kernels::Array<T>& v) const {
  round(v.data(), v.size());
}

template <class T>
const T* ParallelMlp<T>::weights_as_used(const T* params) {
  if (compute_ != MlpCompute::bf16) return params;
  rounded_params_.resize(layout_.count);
  table_.copy(rounded_params_.data(), params, layout_.count);
  round(rounded_params_);
  return rounded_params_.data();
}

template <class T>
void ParallelMlp<T>::tp_all_reduce(kernels::Array<T>& values, StepReport& report) {
  if (tp_ == 1) return;
  const auto count = static_cast<size_t>(values.size());
  // Ring model: 2 c (N - 1) / N elements sent per rank.
  const double bytes = 2.0 * static_cast<double>(count * sizeof(T)) * (tp_ - 1) / tp_;
  table_.synchronize();  // the kernels' partial sums are in memory before the communicator reads them
  blocking_collective(report, bytes, [&] {
    tp_comm_->all_reduce(values.data(), values.data(), count, dtype_of<T>(), ReduceOp::sum);
    // and the sum is in memory before the next kernel reads it
    if (table_.memory() == Memory::device) tp_comm_->synchronize();
  });
  // Every rank of the group must receive the same sum: fold it into a digest the strategy
  // compares across the group (a flipped bit in one rank's result shows even when the rounding
  // that follows hides it from the parameters). The device's sum is read back for it.
  tp_results_digest_ = array_digest(values, static_cast<int64_t>(count), tp_results_digest_);
}

template <class T>
kernels::Array<T> ParallelMlp<T>::forward(const T* params, kernels::Array<T> input, int64_t rows,
                                          const int32_t* labels, SavedActivations<T>& saved, double& loss,
                                          StepReport& report) {
  if (input.size() != rows * input_width()) {
    throw Error(Error::Kind::invalid_argument, "pipeline stage: input does not match the stage's first layer");
  }
  const auto compute_start = std::chrono::steady_clock::now();
  double comm_before = report.comm_time;
  params = weights_as_used(params);
  release(saved);
  saved.rows = rows;
  if (first_stage()) round(input);  // the features, rounded for use (later stages receive rounded values)
  kernels::Array<T> a = std::move(input);
  for (const LocalLayer& layer : layout_.layers) {
    const T* w = params + layer.weight;
    const T* b = params + layer.bias;
    const bool split_sum = layer.split == LayerSplit::row;
    kernels::Array<T> z = array(rows * layer.out_local);
    // z = a W^T over this rank's part: a column shard is a block of W's rows (ldb = in); a row
    // shard is stored compact (ldb = in_local) and yields a partial sum over its input features.
    table_.gemm({false, true, rows, layer.out_local, layer.in_local, layer.in_local, layer.in_local, layer.out_local},
                T(1), a.data(), w, T(0), z.data());
    if (split_sum) tp_all_reduce(z, report);
    kernels::Array<T> pre = array(z.size());
    table_.bias_add(z.data(), b, pre.data(), rows, layer.out_local);
    round(pre);  // the matmul's one rounding, after its bias epilogue
    saved.inputs.push_back(std::move(a));
    a = kernels::Array<T>(table_.memory());
    if (layer.index + 1 < spec_.layers) {
      kernels::Array<T> next = array(z.size());
      table_.bias_gelu_forward(pre.data(), zeros_.data(), z.data(), next.data(), rows, layer.out_local);
      round(next);
      a = std::move(next);
    }
    recycle(std::move(z));
    saved.pre.push_back(std::move(pre));
  }
  if (last_stage()) {
    const int64_t classes = layout_.layers.back().out;
    saved.dlogits = array(rows * classes);
    // Reads the loss back: on the device, the forward pass is done when this returns.
    loss = table_.softmax_cross_entropy(saved.pre.back().data(), labels, saved.dlogits.data(), rows, classes);
  }
  table_.synchronize();  // compute time is the device's, not the launches'
  report.compute_time += seconds_since(compute_start) - (report.comm_time - comm_before);
  return a;
}

template <class T>
kernels::Array<T> ParallelMlp<T>::backward(const T* params, T* grads, SavedActivations<T>& saved,
                                           kernels::Array<T> upstream, double loss_scale, StepReport& report) {
  const auto compute_start = std::chrono::steady_clock::now();
  const double comm_before = report.comm_time;
  params = weights_as_used(params);
  const int64_t rows = saved.rows;
  const int count = static_cast<int>(layout_.layers.size());
  kernels::Array<T> g(table_.memory());
  if (last_stage()) {
    g = std::move(saved.dlogits);
    saved.dlogits = kernels::Array<T>(table_.memory());
    if (loss_scale != 1.0) table_.scale(g.data(), static_cast<T>(loss_scale), g.size());
    round(g);
    const LocalLayer& last = layout_.layers.back();
    T* db = grads + last.bias;
    table_.column_sum(g.data(), db, rows, last.out_local);
    round(db, last.out_local);
  }
  // Through GeLU: the gradient of a layer's pre-activation from that of its output activation,
  // and the layer's bias gradient with it (the step Mlp takes right after the next layer's da).
  const auto through_gelu = [&](const LocalLayer& layer, const kernels::Array<T>& pre, const kernels::Array<T>& da) {
    kernels::Array<T> dz = array(da.size());
    T* db = grads + layer.bias;
    table_.bias_gelu_backward(pre.data(), da.data(), dz.data(), db, rows, layer.out_local);
    if (compute_ == MlpCompute::bf16) {
      // The bias gradient sums the bf16 dz that leaves the GeLU backward, then rounds once.
      round(dz);
      table_.column_sum(dz.data(), db, rows, layer.out_local);
      round(db, layer.out_local);
    }
    return dz;
  };
  if (!last_stage()) {
    if (upstream.size() != rows * output_width()) {
      throw Error(Error::Kind::invalid_argument, "pipeline stage: gradient does not match the stage's output");
    }
    g = through_gelu(layout_.layers.back(), saved.pre.back(), upstream);
  }
  recycle(std::move(upstream));
  kernels::Array<T> input_gradient(table_.memory());
  for (int i = count - 1; i >= 0; --i) {
    const LocalLayer& layer = layout_.layers[static_cast<size_t>(i)];
    const auto ui = static_cast<size_t>(i);
    T* dw = grads + layer.weight;
    // dW = g^T a  (out_local x in_local)
    table_.gemm({true, false, layer.out_local, layer.in_local, rows, layer.out_local, layer.in_local, layer.in_local},
                T(1), g.data(), saved.inputs[ui].data(), T(0), dw);
    round(dw, layer.out_local * layer.in_local);
    if (layer.index == 0) break;
    // da = g W (rows x in_local); a column shard's is a partial sum over its output features.
    kernels::Array<T> da = array(rows * layer.in_local);
    table_.gemm({false, false, rows, layer.in_local, layer.out_local, layer.out_local, layer.in_local, layer.in_local},
                T(1), g.data(), params + layer.weight, T(0), da.data());
    if (layer.split == LayerSplit::column) tp_all_reduce(da, report);
    round(da);
    if (i == 0) {
      input_gradient = std::move(da);  // the previous stage takes it through its GeLU
      break;
    }
    kernels::Array<T> next = through_gelu(layout_.layers[ui - 1], saved.pre[ui - 1], da);
    recycle(std::move(da));
    recycle(std::move(g));
    g = std::move(next);
  }
  table_.synchronize();  // compute time is the device's, not the launches'
  recycle(std::move(g));
  release(saved);
  report.compute_time += seconds_since(compute_start) - (report.comm_time - comm_before);
  return input_gradient;
}

template struct SavedActivations<float>;
template struct SavedActivations<double>;
template class ParallelMlp<float>;
template class ParallelMlp<double>;

}  // namespace dts

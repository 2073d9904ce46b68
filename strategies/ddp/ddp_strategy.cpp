// DDP step: per micro-batch, forward/backward on this rank's slice; on the last micro-batch each
// gradient is folded into the accumulated buffer as backward produces it, and a bucket's
// all_reduce (sum) starts as soon as its last parameter is in. Gradients are pre-scaled by
// rows/global rows, so the sum over ranks is exactly the global mean gradient, even when the
// rows do not split evenly. Open MPI's non-blocking collectives progress only inside MPI calls,
// so every launch also tests the buckets in flight (PyTorch's gloo uses threads for this); the
// time inside those calls is the collectives' work, booked as exposed communication, not compute.
#include "strategies/ddp/ddp_strategy.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "core/error.h"

namespace dts {

size_t auto_bucket_bytes(size_t gradient_bytes) {
  constexpr size_t kMin = size_t{1} << 20, kMax = size_t{25} << 20;
  return std::clamp(gradient_bytes / 4, kMin, kMax);
}

BucketPlan plan_buckets(const std::vector<ParameterInfo>& layout, size_t element_bytes, size_t bucket_bytes) {
  // Buckets in gradient-ready order (reverse layout); each is a contiguous range because
  // neighbours in reverse order are neighbours in the buffer. As in PyTorch, the first bucket is
  // capped at 1 MiB (its _DEFAULT_FIRST_BUCKET_BYTES): the last layers' gradients are ready first,
  // and a small first bucket starts communication early in backward instead of after it (at the
  // 25 MiB default, a model of up to 25 MiB would otherwise be one bucket that starts when
  // backward ends, leaving all of its all_reduce exposed).
  //
  // Bucket size (bucket_bytes 0, the default): a quarter of the gradient, at least 1 MiB and at
  // most PyTorch's 25 MiB. With a fixed 25 MiB, a model of up to ~26 MiB of gradients has the
  // 1 MiB-or-so first bucket and one more that starts only when backward ends: model A (16.8 MB,
  // training_step_bench.cpp), 2 ranks, left 11-14% of its step as exposed communication, and
  // 3-6% with 4 or 8 MiB buckets (strategies/ddp/ddp_step_bench.cpp; the wait after backward only:
  // with the communicator's calls inside backward booked as exposed too, as now, 34% at 25 MiB,
  // 29% at the default, 23% at 4 or 8 MiB). Four or more buckets let
  // all but the last overlap with backward; models of 100 MiB of gradients and more get
  // PyTorch's 25 MiB.
  BucketPlan plan;
  auto& buckets = plan.buckets;
  plan.bucket_of.resize(layout.size());
  constexpr size_t kFirstBucketBytes = size_t{1} << 20;
  const int64_t psi = layout.back().offset + layout.back().size();
  const size_t bytes = bucket_bytes > 0 ? bucket_bytes : auto_bucket_bytes(static_cast<size_t>(psi) * element_bytes);
  const auto elements = [&](size_t b) { return std::max<int64_t>(1, static_cast<int64_t>(b / element_bytes)); };
  const int64_t first_bucket_elements = elements(std::min(bytes, kFirstBucketBytes));
  const int64_t bucket_elements = elements(bytes);
  int64_t end = psi, filled = 0;
  for (size_t i = layout.size(); i-- > 0;) {
    if (filled == 0) {
      buckets.emplace_back(end, end);
      plan.parameters_in_bucket.push_back(0);
    }
    buckets.back().first = layout[i].offset;
    ++plan.parameters_in_bucket.back();
    plan.bucket_of[i] = buckets.size() - 1;
    filled += layout[i].size();
    if (filled >= (buckets.size() == 1 ? first_bucket_elements : bucket_elements)) {
      end = layout[i].offset;
      filled = 0;
    }
  }
  return plan;
}

std::vector<PlannedCall> ddp_calls(const BucketPlan& plan, int n, DType dtype) {
  std::vector<PlannedCall> calls;
  for (size_t b = 0; n > 1 && b < plan.buckets.size(); ++b) {
    PlannedCall call;
    call.group = "dp";
    call.collective = "all_reduce";
    call.dtype = dtype;
    call.group_size = n;
    call.bytes = (plan.buckets[b].second - plan.buckets[b].first) * static_cast<int64_t>(size_of(dtype));
    call.overlaps_backward = b + 1 < plan.buckets.size();
    calls.push_back(call);
  }
  calls.push_back(loss_call("dp", n));
  return calls;
}

std::vector<TrafficTheory> ddp_traffic(const BucketPlan& plan, int n, DType dtype) {
  if (n == 1 || plan.buckets.empty()) return {};
  const size_t element = size_of(dtype);
  const int64_t psi = plan.buckets.front().second - plan.buckets.back().first;
  // Slack: each bucket's ring segments are uneven by at most one element per step, N per bucket.
  return {{"dp", bytes_sent(ddp_calls(plan, n, dtype), "dp"),
           static_cast<double>(plan.buckets.size()) * n * static_cast<double>(element),
           "2*Psi*(N-1)/N*" + std::to_string(element) + " (Psi=" + std::to_string(psi) + ", N=" + std::to_string(n) +
               ", " + std::to_string(plan.buckets.size()) + " buckets)"}};
}

template <class T>
DdpStrategy<T>::DdpStrategy(const ModelSpec& spec, const ParallelConfig& config, Communicator& comm,
                            MlpCompute compute)
    : spec_(spec), config_(config), comm_(comm), table_(comm.memory()), mlp_(spec, compute, comm.memory()),
      params_(comm.memory()), micro_grads_(comm.memory()), grads_(comm.memory()), state1_(comm.memory()),
      state2_(comm.memory()) {
  if (config.microbatches < 1) throw Error(Error::Kind::invalid_argument, "ddp: microbatches must be >= 1");
  const std::vector<double> init = init_parameters(spec);
  const std::vector<T> host(init.begin(), init.end());
  const auto psi = static_cast<int64_t>(host.size());
  params_.resize(psi);
  params_.upload(host.data(), psi);
  for (kernels::Array<T>* zeroed : {&micro_grads_, &grads_, &state1_}) {
    zeroed->resize(psi);
    table_.zero(zeroed->data(), psi);
  }
  if (config.train.optimizer == OptimizerKind::adamw) {
    state2_.resize(psi);
    table_.zero(state2_.data(), psi);
  }
  plan_ = plan_buckets(mlp_.layout(), sizeof(T), config.bucket_bytes);
  table_.synchronize();
}

template <class T>
StepReport DdpStrategy<T>::step(const Batch& batch) {
  if (batch.size < 1) throw Error(Error::Kind::invalid_argument, "ddp: empty global batch");
  const auto step_start = std::chrono::steady_clock::now();
  const int n = comm_.size(), rank = comm_.rank(), k_steps = config_.microbatches;
  StepReport report;
  std::vector<std::unique_ptr<Work>> in_flight(plan_.buckets.size());
  std::vector<int> missing = plan_.parameters_in_bucket;
  std::chrono::steady_clock::time_point first_launch;
  bool launched = false;
  const auto& layout = mlp_.layout();

  // Seconds backward spent inside the communicator (launching buckets, driving their progress):
  // on a host stack that is the collective's own work (copies and reductions run inside MPI's
  // calls), so it is booked as exposed communication (nothing computes meanwhile), not as compute.
  // PyTorch's gloo does that work on threads of its own, outside backward.
  double in_communicator = 0;
  // The first micro-batch's gradient is written straight into grads_ and each later one added to
  // it (the last one parameter by parameter, as backward finishes each): the order of
  // SingleTrainer::step_accumulated, with no pass to zero grads_ first.
  const auto on_ready = [&](size_t index) {
    if (k_steps > 1) {
      const ParameterInfo& p = layout[index];
      table_.add(grads_.data() + p.offset, micro_grads_.data() + p.offset, p.size());
    }
    const size_t b = plan_.bucket_of[index];
    const bool complete = --missing[b] == 0;
    if (complete) table_.synchronize();  // the device's queued backward is done before the communicator reads it
    if (!complete && !launched) return;  // nothing to launch, nothing in flight
    const auto enter = std::chrono::steady_clock::now();
    if (complete) {
      if (!launched) first_launch = enter;
      launched = true;
      T* data = grads_.data() + plan_.buckets[b].first;
      const auto count = static_cast<size_t>(plan_.buckets[b].second - plan_.buckets[b].first);
      in_flight[b] = comm_.all_reduce_async(data, data, count, dtype_of<T>(), ReduceOp::sum);
      // Ring model: reduce-scatter then all-gather, each sending (N-1)/N of the bucket.
      report.bytes_sent += static_cast<int64_t>(2.0 * static_cast<double>(count * sizeof(T)) * (n - 1) / n + 0.5);
      ++report.collectives;
    }
    for (auto& work : in_flight) {
      if (work) work->test();  // drive progress of collectives in flight
    }
    in_communicator += seconds_since(enter);
  };

  double loss_sum = 0;
  const StragglerWait wait = straggler_wait_for(table_.memory());
  for (int k = 0; k < k_steps; ++k) {
    const auto [micro_first, micro_rows] = even_split(batch.size, k_steps, k);
    const auto [local_first, local_rows] = even_split(micro_rows, n, rank);
    const Batch local = slice_batch(batch, micro_first + local_first, local_rows);
    const bool last = k == k_steps - 1;
    const double scale = static_cast<double>(local_rows) / static_cast<double>(batch.size);
    const auto compute_start = std::chrono::steady_clock::now();
    T* target = k == 0 ? grads_.data() : micro_grads_.data();
    const double loss = mlp_.forward_backward(params_.data(), target, local, scale,
                                              last ? std::function<void(size_t)>(on_ready) : nullptr);
    if (!last && k > 0) table_.add(grads_.data(), micro_grads_.data(), grads_.size());
    table_.synchronize();  // compute time is the device's, not the launches'
    const double computed = seconds_since(compute_start) - in_communicator;
    report.compute_time += computed + straggle(config_, rank, computed, wait);
    report.exposed_comm_time += in_communicator;
    in_communicator = 0;
    activations_peak_ = std::max(activations_peak_, mlp_.activation_bytes());
    loss_sum += loss * static_cast<double>(local_rows);
  }

  const auto wait_start = std::chrono::steady_clock::now();
  for (auto& work : in_flight) {
    if (work) work->wait();  // a hang here is the harness watchdog's to report
  }
  report.exposed_comm_time += seconds_since(wait_start);
  if (launched) report.comm_time = seconds_since(first_launch);

  const auto optimizer_start = std::chrono::steady_clock::now();
  ++steps_;
  optimizer_step(table_, config_.train, params_.data(), grads_.data(), state1_.data(),
                 state2_.empty() ? nullptr : state2_.data(), params_.size(), steps_);
  table_.synchronize();
  report.compute_time += seconds_since(optimizer_start);

  report.loss = global_mean_loss(comm_, loss_sum, batch.size);
  report.step_time = seconds_since(step_start);
  return report;
}

template <class T>
void DdpStrategy<T>::set_learning_rate(double lr) {
  set_optimizer_learning_rate(config_.train, lr, name());
}

template <class T>
std::vector<double> DdpStrategy<T>::full_parameters() {
  const std::vector<T> params = params_.download();  // replicated: every rank has them all
  return {params.begin(), params.end()};
}

template <class T>
std::vector<TrafficTheory> DdpStrategy<T>::expected_traffic() const {
  return ddp_traffic(plan_, comm_.size(), dtype_of<T>());
}

template <class T>
MemoryReport DdpStrategy<T>::memory() const {
  return {params_.bytes(), grads_.bytes() + micro_grads_.bytes(), state1_.bytes() + state2_.bytes(), activations_peak_};
}

template class DdpStrategy<float>;
template class DdpStrategy<double>;

namespace {
// Host and device alike: the class takes the memory of its communicator (check_strategy has
// refused f64 on the device).
std::unique_ptr<Strategy> make_ddp(const ModelSpec& spec, const ParallelConfig& config, ProcessGroups& groups,
                                   Precision precision) {
  Communicator& comm = *groups.dp;
  if (precision == Precision::f64) return std::make_unique<DdpStrategy<double>>(spec, config, comm);
  return std::make_unique<DdpStrategy<float>>(spec, config, comm, compute_of(precision));
}
}  // namespace

DTS_REGISTER_STRATEGY("ddp", data_parallel_traits("data parallel, bucketed all_reduce overlapping backward"), make_ddp);
DTS_REGISTER_DEVICE_STRATEGY("ddp", make_ddp);

}  // namespace dts

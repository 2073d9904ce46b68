// Gossip SGD (gossip_strategy.h): the rank's step, the one-process replay of every rank, and the
// mixing both use, so that the replay performs the same operations in the same order.
#include "strategies/gossip/gossip_strategy.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>

#include "core/error.h"

namespace dts {

namespace {

int left_of(int rank, int n) { return (rank + n - 1) % n; }
int right_of(int rank, int n) { return (rank + 1) % n; }

// x <- (left + x + right) / 3 (three or more ranks), (x + other) / 2 (two ranks), element by
// element in that order of operations, through `table` (memory of the arrays).
template <class T>
void mix(const kernels::KernelTable<T>& table, int n, const T* left, T* self, const T* right, int64_t count) {
  if (n < 2) return;
  table.add(self, left, count);  // x + left, bit for bit left + x
  if (n > 2) table.add(self, right, count);
  table.divide(self, T(n == 2 ? 2 : 3), count);
}

template <class T>
GossipReplay replay(const ModelSpec& spec, const TrainConfig& train, Precision precision, int n,
                    const std::vector<Batch>& batches, Memory memory) {
  const std::vector<double> init = init_parameters(spec);
  const std::vector<T> start(init.begin(), init.end());
  const auto psi = static_cast<int64_t>(init.size());
  const kernels::KernelTable<T> table(memory);
  Mlp<T> mlp(spec, compute_of(precision), memory);
  const auto arrays = [&] {
    std::vector<kernels::Array<T>> v;
    for (int r = 0; r < n; ++r) v.emplace_back(memory, psi);
    return v;
  };
  std::vector<kernels::Array<T>> x = arrays(), before = arrays(), grads = arrays(), state1 = arrays(), state2;
  if (train.optimizer == OptimizerKind::adamw) state2 = arrays();
  for (int r = 0; r < n; ++r) {
    x[static_cast<size_t>(r)].upload(start.data(), psi);
    table.zero(state1[static_cast<size_t>(r)].data(), psi);
    if (!state2.empty()) table.zero(state2[static_cast<size_t>(r)].data(), psi);
  }
  GossipReplay result;
  int64_t step = 0;
  for (const Batch& batch : batches) {
    ++step;
    for (int r = 0; r < n; ++r) {
      const auto [first, rows] = even_split(batch.size, n, r);
      mlp.forward_backward(x[static_cast<size_t>(r)].data(), grads[static_cast<size_t>(r)].data(),
                           slice_batch(batch, first, rows), 1.0);
    }
    for (int r = 0; r < n; ++r) {  // every rank mixes what its neighbours held
      table.copy(before[static_cast<size_t>(r)].data(), x[static_cast<size_t>(r)].data(), psi);
    }
    for (int r = 0; r < n; ++r) {
      const auto i = static_cast<size_t>(r);
      mix(table, n, before[static_cast<size_t>(left_of(r, n))].data(), x[i].data(),
          before[static_cast<size_t>(right_of(r, n))].data(), psi);
      optimizer_step(table, train, x[i].data(), grads[i].data(), state1[i].data(),
                     state2.empty() ? nullptr : state2[i].data(), psi, step);
    }
    std::vector<std::vector<T>> held;
    for (const auto& mine : x) held.push_back(mine.download());
    double spread = 0;
    for (size_t e = 0; e < static_cast<size_t>(psi); ++e) {
      T low = held[0][e], high = held[0][e];
      for (const auto& h : held) {
        low = std::min(low, h[e]);
        high = std::max(high, h[e]);
      }
      spread = std::max(spread, static_cast<double>(high) - static_cast<double>(low));
    }
    result.spread.push_back(spread);
  }
  for (const auto& mine : x) {
    const std::vector<T> held = mine.download();
    result.parameters.insert(result.parameters.end(), held.begin(), held.end());
  }
  return result;
}

}  // namespace

GossipReplay replay_gossip(const ModelSpec& spec, const TrainConfig& train, Precision precision, int ranks,
                           const std::vector<Batch>& batches, Memory memory) {
  if (ranks < 1) throw Error(Error::Kind::invalid_argument, "gossip replay: ranks must be >= 1");
  return precision == Precision::f64 ? replay<double>(spec, train, precision, ranks, batches, memory)
                                     : replay<float>(spec, train, precision, ranks, batches, memory);
}

template <class T>
GossipStrategy<T>::GossipStrategy(const ModelSpec& spec, const ParallelConfig& config, Communicator& comm,
                                  Precision precision)
    : spec_(spec), config_(config), comm_(comm), precision_(precision), table_(comm.memory()),
      mlp_(spec, compute_of(precision), comm.memory()), params_(comm.memory()), grads_(comm.memory()),
      state1_(comm.memory()), state2_(comm.memory()), left_(comm.memory()), right_(comm.memory()),
      digests_(comm.memory(), 3) {
  if (config.tp != 1 || config.pp != 1 || config.zero != 0 || config.microbatches != 1 || comm.size() != config.dp) {
    throw Error(Error::Kind::invalid_argument, "gossip " + config.describe() + ": ranks split the batch only (dp = N)");
  }
  const std::vector<double> init = init_parameters(spec);
  const std::vector<T> host(init.begin(), init.end());
  const auto psi = static_cast<int64_t>(host.size());
  params_.resize(psi);
  params_.upload(host.data(), psi);
  std::vector<kernels::Array<T>*> zeroed{&grads_, &state1_};
  if (config.train.optimizer == OptimizerKind::adamw) zeroed.push_back(&state2_);
  for (kernels::Array<T>* array : zeroed) {
    array->resize(psi);
    table_.zero(array->data(), psi);
  }
  table_.synchronize();
}

template <class T>
StepReport GossipStrategy<T>::step(const Batch& batch) {
  const int n = comm_.size(), rank = comm_.rank();
  if (batch.size < n) {
    throw Error(Error::Kind::invalid_argument,
                "gossip: a global batch of " + std::to_string(batch.size) + " rows leaves a rank without a row");
  }
  const auto start = std::chrono::steady_clock::now();
  StepReport report;
  const auto [first, rows] = even_split(batch.size, n, rank);
  const double local_loss = mlp_.forward_backward(params_.data(), grads_.data(), slice_batch(batch, first, rows), 1.0);
  table_.synchronize();  // compute time is the device's, and the communicator reads the parameters
  activations_peak_ = std::max(activations_peak_, mlp_.activation_bytes());
  report.compute_time = compute_seconds(config_, rank, start, straggler_wait_for(table_.memory()));
  batches_.emplace_back(batch.first, batch.size);

  if (n > 1) {
    const auto comm_start = std::chrono::steady_clock::now();
    const int64_t psi = params_.size();
    left_.resize(psi);
    right_.resize(psi);
    // Each model travels with its digest: a bit flipped on the way that the mixing's rounding
    // would absorb (the replay cannot see it) still fails the digest.
    const uint64_t mine = array_digest(params_, params_.size());
    digests_.upload(&mine, 1);
    uint64_t* word = digests_.data();  // [0] mine, [1] from the left, [2] from the right
    std::vector<std::unique_ptr<Work>> works;
    const int left = left_of(rank, n), right = right_of(rank, n);
    const auto count = static_cast<size_t>(psi);
    works.push_back(comm_.irecv(left_.data(), count, dtype_of<T>(), left));
    works.push_back(comm_.irecv(word + 1, 1, DType::u64, left));
    if (n > 2) {
      works.push_back(comm_.irecv(right_.data(), count, dtype_of<T>(), right));
      works.push_back(comm_.irecv(word + 2, 1, DType::u64, right));
    }
    works.push_back(comm_.isend(params_.data(), count, dtype_of<T>(), right));
    works.push_back(comm_.isend(word, 1, DType::u64, right));
    if (n > 2) {
      works.push_back(comm_.isend(params_.data(), count, dtype_of<T>(), left));
      works.push_back(comm_.isend(word, 1, DType::u64, left));
    }
    for (auto& work : works) work->wait();  // a neighbour that never answers is the watchdog's
    comm_.synchronize();                    // what arrived is in place before the host or a kernel reads it
    const std::vector<uint64_t> received = digests_.download();
    corrupt_receives_ += array_digest(left_, left_.size()) != received[1];
    if (n > 2) corrupt_receives_ += array_digest(right_, right_.size()) != received[2];
    report.comm_time = seconds_since(comm_start);
    report.exposed_comm_time = report.comm_time;
    report.idle_time = report.comm_time;
    report.bytes_sent = static_cast<int64_t>(count * sizeof(T) + sizeof(uint64_t)) * (n > 2 ? 2 : 1);
    report.collectives = n > 2 ? 2 : 1;
    mix(table_, n, left_.data(), params_.data(), right_.data(), psi);
  }
  const auto optimizer_start = std::chrono::steady_clock::now();
  ++steps_;
  optimizer_step(table_, config_.train, params_.data(), grads_.data(), state1_.data(),
                 state2_.empty() ? nullptr : state2_.data(), params_.size(), steps_);
  table_.synchronize();
  report.compute_time += seconds_since(optimizer_start);
  // This rank's loss on its rows and its own model, with no global reduction (a per-step
  // all_reduce would synchronize every rank, which gossip exists to avoid: a straggler would hold
  // them all). Rounded as one process rounds its loss (sum over rows, then / rows), so one rank
  // equals one process bit for bit.
  report.loss = local_loss * static_cast<double>(rows) / static_cast<double>(rows);
  report.step_time = seconds_since(start);
  return report;
}

namespace {
// Every rank's `values`, rank-major, on the host (collective).
template <class T>
std::vector<T> gather_to_host(Communicator& comm, const kernels::Array<T>& values, DType dtype) {
  kernels::Array<T> all(comm.memory(), values.size() * comm.size());
  comm.all_gather(values.data(), all.data(), static_cast<size_t>(values.size()), dtype);
  comm.synchronize();
  return all.download();
}
}  // namespace

template <class T>
std::vector<double> GossipStrategy<T>::full_parameters() {
  const int n = comm_.size();
  const std::vector<T> all = gather_to_host(comm_, params_, dtype_of<T>());
  std::vector<double> mean(static_cast<size_t>(params_.size()), 0.0);
  for (int r = 0; r < n; ++r) {
    for (size_t e = 0; e < mean.size(); ++e) mean[e] += static_cast<double>(all[static_cast<size_t>(r) * mean.size() + e]);
  }
  for (double& v : mean) v /= n;
  return mean;
}

template <class T>
MemoryReport GossipStrategy<T>::memory() const {
  // The neighbours' copies count with the parameters: a rank holds three models while it mixes.
  return {params_.bytes() + left_.bytes() + right_.bytes(), grads_.bytes(), state1_.bytes() + state2_.bytes(),
          activations_peak_};
}

std::vector<PlannedCall> gossip_calls(int64_t psi, int n, int rank, DType dtype) {
  std::vector<PlannedCall> calls;
  if (n < 2) return calls;
  std::vector<int> neighbours{right_of(rank, n)};
  if (n > 2) neighbours.push_back(left_of(rank, n));
  for (int to : neighbours) {
    calls.push_back(message_call("ring", dtype, psi * static_cast<int64_t>(size_of(dtype)), rank, to));
    calls.push_back(message_call("ring", DType::u64, sizeof(uint64_t), rank, to));
  }
  return calls;
}

template <class T>
std::vector<TrafficTheory> GossipStrategy<T>::expected_traffic() const {
  const int n = comm_.size();
  if (n == 1) return {};
  const double bytes = bytes_sent(gossip_calls(params_.size(), n, comm_.rank(), dtype_of<T>()), "ring");
  return {{"ring", bytes, 0,
           std::string(n > 2 ? "2*" : "") + "(Psi*" + std::to_string(sizeof(T)) + " + 8) (Psi=" +
               std::to_string(params_.size()) + "): the parameters and their digest to each ring neighbour; independent of N"}};
}

template <class T>
void GossipStrategy<T>::set_learning_rate(double lr) {
  set_optimizer_learning_rate(config_.train, lr, name());
}

template <class T>
std::optional<ReplayAudit> GossipStrategy<T>::audit() {
  const int n = comm_.size();
  const std::vector<T> all = gather_to_host(comm_, params_, dtype_of<T>());
  kernels::Array<int64_t> mine(comm_.memory(), 1);
  mine.upload(&corrupt_receives_, 1);
  const std::vector<int64_t> corrupt = gather_to_host(comm_, mine, DType::i64);
  ReplayAudit audit;
  if (comm_.rank() != 0) return audit;
  std::vector<Batch> batches;
  for (const auto& [first, rows] : batches_) batches.push_back(make_batch(spec_, first, rows));
  const GossipReplay replayed = replay_gossip(spec_, config_.train, precision_, n, batches, table_.memory());
  audit.ran = true;
  audit.updates = steps_;
  audit.applied = steps_ * n;
  audit.spread = replayed.spread;
  audit.replayed = std::to_string(steps_) + " steps of each of " + std::to_string(n) + " ranks replayed in one process";
  int first_bad = -1;
  for (size_t i = 0; i < all.size(); ++i) {
    const double got = static_cast<double>(all[i]), want = replayed.parameters[i];
    if (std::memcmp(&got, &want, sizeof(double)) != 0) {
      ++audit.mismatched;
      audit.max_abs_difference = std::max(audit.max_abs_difference, std::fabs(got - want));
      if (first_bad < 0) first_bad = static_cast<int>(i / static_cast<size_t>(params_.size()));
    }
  }
  if (audit.mismatched > 0) {
    audit.problem = std::to_string(audit.mismatched) + " of " + std::to_string(all.size()) +
                    " parameters (all ranks) differ from one process replaying every rank; first on rank " +
                    std::to_string(first_bad);
  }
  for (int r = 0; r < n; ++r) {
    if (corrupt[static_cast<size_t>(r)] > 0) {
      audit.problem += (audit.problem.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + " received " +
                       std::to_string(corrupt[static_cast<size_t>(r)]) + " neighbour models that failed their digest";
    }
  }
  return audit;
}

template class GossipStrategy<float>;
template class GossipStrategy<double>;

namespace {
// Host and device alike: the class takes the memory of its communicator (check_strategy has
// refused f64 on the device).
std::unique_ptr<Strategy> make_gossip(const ModelSpec& spec, const ParallelConfig& config, ProcessGroups& groups,
                                      Precision precision) {
  Communicator& comm = *groups.dp;
  if (precision == Precision::f64) return std::make_unique<GossipStrategy<double>>(spec, config, comm, precision);
  return std::make_unique<GossipStrategy<float>>(spec, config, comm, precision);
}
}  // namespace

DTS_REGISTER_STRATEGY("gossip",
                      [] {
                        // One local step per mixing: no micro-batches (--accumulation does not apply).
                        StrategyTraits traits = data_parallel_traits(
                            "gossip SGD (D-PSGD): local step, parameters averaged with ring neighbours");
                        traits.accumulation = false;
                        return traits;
                      }(),
                      make_gossip);
DTS_REGISTER_DEVICE_STRATEGY("gossip", make_gossip);

}  // namespace dts

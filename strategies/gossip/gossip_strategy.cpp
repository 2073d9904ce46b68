// Gossip SGD (gossip_strategy.h): the rank's step, the one-process replay of every rank, and the
// mixing both use, so that the replay performs the same operations in the same order.
#include "strategies/gossip/gossip_strategy.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>

#include "core/error.h"
#include "strategies/ddp/ddp_strategy.h"  // set_optimizer_learning_rate

namespace dts {

namespace {

int left_of(int rank, int n) { return (rank + n - 1) % n; }
int right_of(int rank, int n) { return (rank + 1) % n; }

// x <- (left + x + right) / 3 (three or more ranks), (x + other) / 2 (two ranks), element by
// element in that order of operations.
template <class T>
void mix(int n, const T* left, T* self, const T* right, size_t count) {
  if (n == 2) {
    for (size_t e = 0; e < count; ++e) self[e] = (self[e] + left[e]) / T(2);
  } else if (n > 2) {
    for (size_t e = 0; e < count; ++e) self[e] = (left[e] + self[e] + right[e]) / T(3);
  }
}

template <class T>
GossipReplay replay(const ModelSpec& spec, const TrainConfig& train, Precision precision, int n,
                    const std::vector<Batch>& batches) {
  const std::vector<double> init = init_parameters(spec);
  const size_t psi = init.size();
  Mlp<T> mlp(spec, compute_of(precision));
  std::vector<std::vector<T>> x(static_cast<size_t>(n), std::vector<T>(init.begin(), init.end()));
  std::vector<std::vector<T>> grads(static_cast<size_t>(n), std::vector<T>(psi));
  std::vector<std::vector<T>> state1(static_cast<size_t>(n), std::vector<T>(psi, T(0)));
  std::vector<std::vector<T>> state2(static_cast<size_t>(n));
  if (train.optimizer == OptimizerKind::adamw) {
    for (auto& s : state2) s.assign(psi, T(0));
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
    const std::vector<std::vector<T>> before = x;  // every rank mixes what its neighbours held
    double spread = 0;
    for (int r = 0; r < n; ++r) {
      auto& mine = x[static_cast<size_t>(r)];
      mix(n, before[static_cast<size_t>(left_of(r, n))].data(), mine.data(), before[static_cast<size_t>(right_of(r, n))].data(),
          psi);
      optimizer_step(train, mine.data(), grads[static_cast<size_t>(r)].data(), state1[static_cast<size_t>(r)].data(),
                     state2[static_cast<size_t>(r)].empty() ? nullptr : state2[static_cast<size_t>(r)].data(),
                     static_cast<int64_t>(psi), step);
    }
    for (size_t e = 0; e < psi; ++e) {
      T low = x[0][e], high = x[0][e];
      for (int r = 1; r < n; ++r) {
        low = std::min(low, x[static_cast<size_t>(r)][e]);
        high = std::max(high, x[static_cast<size_t>(r)][e]);
      }
      spread = std::max(spread, static_cast<double>(high) - static_cast<double>(low));
    }
    result.spread.push_back(spread);
  }
  for (const auto& mine : x) result.parameters.insert(result.parameters.end(), mine.begin(), mine.end());
  return result;
}

}  // namespace

GossipReplay replay_gossip(const ModelSpec& spec, const TrainConfig& train, Precision precision, int ranks,
                           const std::vector<Batch>& batches) {
  if (ranks < 1) throw Error(Error::Kind::invalid_argument, "gossip replay: ranks must be >= 1");
  return precision == Precision::f64 ? replay<double>(spec, train, precision, ranks, batches)
                                     : replay<float>(spec, train, precision, ranks, batches);
}

template <class T>
GossipStrategy<T>::GossipStrategy(const ModelSpec& spec, const ParallelConfig& config, Communicator& comm,
                                  Precision precision)
    : spec_(spec), config_(config), comm_(comm), precision_(precision), mlp_(spec, compute_of(precision)) {
  if (config.tp != 1 || config.pp != 1 || config.zero != 0 || config.microbatches != 1 || comm.size() != config.dp) {
    throw Error(Error::Kind::invalid_argument, "gossip " + config.describe() + ": ranks split the batch only (dp = N)");
  }
  const std::vector<double> init = init_parameters(spec);
  params_.assign(init.begin(), init.end());
  grads_.assign(params_.size(), T(0));
  state1_.assign(params_.size(), T(0));
  if (config.train.optimizer == OptimizerKind::adamw) state2_.assign(params_.size(), T(0));
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
  activations_peak_ = std::max(activations_peak_, mlp_.activation_bytes());
  report.compute_time = compute_seconds(config_, rank, start);
  batches_.emplace_back(batch.first, batch.size);

  if (n > 1) {
    const auto comm_start = std::chrono::steady_clock::now();
    left_.resize(params_.size());
    right_.resize(params_.size());
    // Each model travels with its digest: a bit flipped on the way that the mixing's rounding
    // would absorb (the replay cannot see it) still fails the digest.
    std::vector<std::unique_ptr<Work>> works;
    const int left = left_of(rank, n), right = right_of(rank, n);
    uint64_t mine = digest_of(params_), from_left = 0, from_right = 0;
    works.push_back(comm_.irecv(left_.data(), left_.size(), dtype_of<T>(), left));
    works.push_back(comm_.irecv(&from_left, 1, DType::u64, left));
    if (n > 2) {
      works.push_back(comm_.irecv(right_.data(), right_.size(), dtype_of<T>(), right));
      works.push_back(comm_.irecv(&from_right, 1, DType::u64, right));
    }
    works.push_back(comm_.isend(params_.data(), params_.size(), dtype_of<T>(), right));
    works.push_back(comm_.isend(&mine, 1, DType::u64, right));
    if (n > 2) {
      works.push_back(comm_.isend(params_.data(), params_.size(), dtype_of<T>(), left));
      works.push_back(comm_.isend(&mine, 1, DType::u64, left));
    }
    for (auto& work : works) work->wait();  // a neighbour that never answers is the watchdog's
    corrupt_receives_ += digest_of(left_) != from_left;
    if (n > 2) corrupt_receives_ += digest_of(right_) != from_right;
    report.comm_time = seconds_since(comm_start);
    report.exposed_comm_time = report.comm_time;
    report.idle_time = report.comm_time;
    report.bytes_sent = static_cast<int64_t>(params_.size() * sizeof(T) + sizeof(uint64_t)) * (n > 2 ? 2 : 1);
    report.collectives = n > 2 ? 2 : 1;
    mix(n, left_.data(), params_.data(), right_.data(), params_.size());
  }
  const auto optimizer_start = std::chrono::steady_clock::now();
  ++steps_;
  optimizer_step(config_.train, params_.data(), grads_.data(), state1_.data(), state2_.empty() ? nullptr : state2_.data(),
                 static_cast<int64_t>(params_.size()), steps_);
  report.compute_time += seconds_since(optimizer_start);
  // This rank's loss on its rows and its own model, with no global reduction (a per-step
  // all_reduce would synchronize every rank, which gossip exists to avoid: a straggler would hold
  // them all). Rounded as one process rounds its loss (sum over rows, then / rows), so one rank
  // equals one process bit for bit.
  report.loss = local_loss * static_cast<double>(rows) / static_cast<double>(rows);
  report.step_time = seconds_since(start);
  return report;
}

template <class T>
std::vector<double> GossipStrategy<T>::full_parameters() {
  const int n = comm_.size();
  std::vector<T> all(params_.size() * static_cast<size_t>(n));
  comm_.all_gather(params_.data(), all.data(), params_.size(), dtype_of<T>());
  std::vector<double> mean(params_.size(), 0.0);
  for (int r = 0; r < n; ++r) {
    for (size_t e = 0; e < mean.size(); ++e) mean[e] += static_cast<double>(all[static_cast<size_t>(r) * mean.size() + e]);
  }
  for (double& v : mean) v /= n;
  return mean;
}

template <class T>
MemoryReport GossipStrategy<T>::memory() const {
  const auto bytes = [](const std::vector<T>& v) { return static_cast<int64_t>(v.size() * sizeof(T)); };
  // The neighbours' copies count with the parameters: a rank holds three models while it mixes.
  return {bytes(params_) + bytes(left_) + bytes(right_), bytes(grads_), bytes(state1_) + bytes(state2_),
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
  const double bytes = bytes_sent(gossip_calls(static_cast<int64_t>(params_.size()), n, comm_.rank(), dtype_of<T>()), "ring");
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
  std::vector<T> all(params_.size() * static_cast<size_t>(n));
  comm_.all_gather(params_.data(), all.data(), params_.size(), dtype_of<T>());
  std::vector<int64_t> corrupt(static_cast<size_t>(n));
  comm_.all_gather(&corrupt_receives_, corrupt.data(), 1, DType::i64);
  ReplayAudit audit;
  if (comm_.rank() != 0) return audit;
  std::vector<Batch> batches;
  for (const auto& [first, rows] : batches_) batches.push_back(make_batch(spec_, first, rows));
  const GossipReplay replayed = replay_gossip(spec_, config_.train, precision_, n, batches);
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
      if (first_bad < 0) first_bad = static_cast<int>(i / params_.size());
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

DTS_REGISTER_STRATEGY("gossip",
                      [] {
                        // One local step per mixing: no micro-batches (--accumulation does not apply).
                        StrategyTraits traits = data_parallel_traits(
                            "gossip SGD (D-PSGD): local step, parameters averaged with ring neighbours");
                        traits.accumulation = false;
                        return traits;
                      }(),
                      [](const ModelSpec& spec, const ParallelConfig& config, ProcessGroups& groups,
                         Precision precision) -> std::unique_ptr<Strategy> {
                        Communicator& comm = *groups.dp;
                        if (precision == Precision::f64) return std::make_unique<GossipStrategy<double>>(spec, config, comm, precision);
                        return std::make_unique<GossipStrategy<float>>(spec, config, comm, precision);
                      });

}  // namespace dts

// Helpers shared by strategies: the registry, layouts and process groups, batch slicing, even
// splits, and the same-order one-process run.
#include "strategies/strategy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "core/buffer.h"
#include "core/error.h"
#include "kernels/device/device_kernels.h"

namespace dts {

namespace {
struct Registered {
  StrategyTraits traits;
  StrategyFactory factory;
  StrategyFactory device_factory;  // empty: the strategy keeps host tensors
};
std::map<std::string, Registered>& strategy_registry() {
  static std::map<std::string, Registered> registry;
  return registry;
}
// A replicated state as words of an all_gather: its key's hash (what is compared), the key's
// first 16 bytes (to name it), its digest.
constexpr size_t kDigestWords = 4, kKeyNameBytes = 16;

void put_digest(const ReplicaDigest& d, int64_t* words) {
  const uint64_t key = name_hash(d.key);
  std::memcpy(&words[0], &key, sizeof key);
  char name[kKeyNameBytes] = {};
  std::memcpy(name, d.key.data(), std::min(d.key.size(), kKeyNameBytes));
  std::memcpy(&words[1], name, kKeyNameBytes);
  std::memcpy(&words[3], &d.digest, sizeof d.digest);
}

std::string key_name(const int64_t* words) {
  char name[kKeyNameBytes + 1] = {};
  std::memcpy(name, &words[1], kKeyNameBytes);
  return name;
}

}  // namespace

double ring_bytes_sent(const PlannedCall& call) {
  const double n = call.group_size, bytes = static_cast<double>(call.bytes);
  if (call.collective == "send_recv") return bytes;
  if (call.group_size < 2) return 0;
  if (call.collective == "all_reduce") return 2 * bytes * (n - 1) / n;
  if (call.collective == "reduce_scatter" || call.collective == "all_gather") return bytes * (n - 1) / n;
  throw Error(Error::Kind::invalid_argument, "ring_bytes_sent: no ring model of " + call.collective);
}

double bytes_sent(const std::vector<PlannedCall>& calls, std::string_view group) {
  double total = 0;
  for (const PlannedCall& call : calls) {
    if (call.group == group && !call.loss) total += static_cast<double>(call.count) * ring_bytes_sent(call);
  }
  return total;
}

PlannedCall loss_call(std::string group, int n) {
  PlannedCall call;
  call.group = std::move(group);
  call.collective = "all_reduce";
  call.dtype = DType::f64;
  call.group_size = n;
  call.bytes = sizeof(double);
  call.loss = true;
  return call;
}

PlannedCall message_call(std::string group, DType dtype, int64_t bytes, int from, int to) {
  PlannedCall call;
  call.group = std::move(group);
  call.collective = "send_recv";
  call.dtype = dtype;
  call.group_size = 2;
  call.bytes = bytes;
  call.from = from;
  call.to = to;
  return call;
}

ReplicaComparison compare_replicas(Communicator& control, const std::vector<ReplicaDigest>& mine) {
  ReplicaComparison out;
  const int n = control.size();
  const auto count = static_cast<int64_t>(mine.size());
  std::vector<int64_t> counts(static_cast<size_t>(n));
  control.all_gather(&count, counts.data(), 1, DType::i64);
  const auto width = static_cast<size_t>(*std::max_element(counts.begin(), counts.end())) * kDigestWords;
  if (width == 0) return out;
  std::vector<int64_t> words(width, 0), all(width * static_cast<size_t>(n));
  for (size_t i = 0; i < mine.size(); ++i) put_digest(mine[i], &words[i * kDigestWords]);
  control.all_gather(words.data(), all.data(), width, DType::i64);
  std::map<int64_t, std::pair<const int64_t*, int>> first;  // key hash -> its first entry and rank
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < counts[static_cast<size_t>(r)]; ++i) {
      const int64_t* entry = &all[static_cast<size_t>(r) * width + static_cast<size_t>(i) * kDigestWords];
      const auto [seen, inserted] = first.emplace(entry[0], std::make_pair(entry, r));
      if (inserted) continue;
      ++out.compared;
      if (seen->second.first[3] == entry[3]) continue;
      if (++out.mismatches == 1) {
        out.first = "rank " + std::to_string(r) + "'s " + key_name(entry) + " differs from rank " +
                    std::to_string(seen->second.second) + "'s";
      }
    }
  }
  return out;
}

std::string_view name(PipelineSchedule schedule) {
  switch (schedule) {
    case PipelineSchedule::none: return "none";
    case PipelineSchedule::gpipe: return "gpipe";
    case PipelineSchedule::one_f_one_b: return "1f1b";
  }
  return "?";
}

std::string ParallelConfig::describe() const {
  char factor[32];
  std::snprintf(factor, sizeof factor, "%g", straggler_factor);
  return "dp=" + std::to_string(dp) + ";tp=" + std::to_string(tp) + ";pp=" + std::to_string(pp) +
         ";zero=" + std::to_string(zero) + ";mb=" + std::to_string(microbatches) +
         ";schedule=" + std::string(name(schedule)) +
         (servers > 0 ? ";servers=" + std::to_string(servers) + ";staleness=" + std::to_string(staleness) +
                            ";backup=" + std::to_string(backup)
                      : "") +
         (has_straggler() ? ";straggler=" + std::to_string(straggler_rank) + ":" + factor : "");
}

ProcessGroups ProcessGroups::split(Communicator& world, const ParallelConfig& config) {
  if (config.dp < 1 || config.tp < 1 || config.pp < 1 || world.size() != config.world()) {
    throw Error(Error::Kind::invalid_argument, "layout dp=" + std::to_string(config.dp) + " x tp=" +
                                                   std::to_string(config.tp) + " x pp=" + std::to_string(config.pp) +
                                                   " needs " + std::to_string(config.world()) + " ranks, not " +
                                                   std::to_string(world.size()));
  }
  ProcessGroups groups;
  groups.world = &world;
  // Parameter servers talk point to point over the whole layout: no groups to split.
  if (config.servers > 0) return groups;
  const int rank = world.rank(), dp = config.dp, tp = config.tp;
  groups.tp_index = rank % tp;
  groups.dp_index = (rank / tp) % dp;
  groups.pp_index = rank / (tp * dp);
  // Each split is collective over `world`; the color names the group, the key orders it. A group
  // of one rank carries nothing, and on a device stack each split is a library communicator of
  // its own (NCCL: buffers and connections): tp and pp are split only where the layout has more
  // than one (null otherwise, which only the strategies that take tp or pp read). dp likewise,
  // but wherever the layout is data parallel alone (tp = pp = 1: ddp, zero1-3 and gossip call it at
  // any size, a one-rank layout's calls included) or shards over it (ZeRO-1 in hybrid): a tp or
  // pipeline layout with dp = 1 makes no dp group.
  if (tp > 1) groups.tp = world.split(groups.pp_index * dp + groups.dp_index, groups.tp_index);
  if (dp > 1 || (tp == 1 && config.pp == 1) || config.zero > 0) {
    groups.dp = world.split(groups.pp_index * tp + groups.tp_index, groups.dp_index);
  }
  if (config.pp > 1) groups.pp = world.split(groups.dp_index * tp + groups.tp_index, groups.pp_index);
  return groups;
}

void set_optimizer_learning_rate(TrainConfig& train, double lr, std::string_view strategy) {
  if (!std::isfinite(lr) || lr < 0) {
    throw Error(Error::Kind::invalid_argument,
                std::string(strategy) + ": learning rate " + std::to_string(lr) + " is not finite and >= 0");
  }
  // SGD here is PyTorch's form (v = m v + g, p -= lr v): the lr is outside the velocity, so a
  // changed lr needs no momentum correction (Goyal et al. 2017, section 2.1).
  (train.optimizer == OptimizerKind::sgd ? train.sgd.lr : train.adamw.lr) = lr;
}

bool register_strategy(std::string name, StrategyTraits traits, StrategyFactory factory) {
  Registered& entry = strategy_registry()[std::move(name)];
  entry.traits = std::move(traits);
  entry.factory = std::move(factory);
  return true;
}

// Static registrations run in no set order across files, so either registration may come first.
namespace {
// The straggler's wait on the device: a delay kernel of the length asked, waited for, so the
// device is as busy as a processor that much slower would be.
void device_straggler_wait(double seconds) {
  kernels::device::delay(seconds);
  kernels::device::synchronize();
}
}  // namespace

StragglerWait straggler_wait_for(Memory memory) {
  return memory == Memory::host ? StragglerWait{kernels::cpu::delay} : StragglerWait{device_straggler_wait};
}

bool register_device_strategy(std::string name, StrategyFactory factory) {
  strategy_registry()[std::move(name)].device_factory = std::move(factory);
  return true;
}

std::vector<std::string> device_strategies() {
  std::vector<std::string> names;
  for (const auto& [name, entry] : strategy_registry()) {
    if (entry.device_factory) names.push_back(name);
  }
  return names;
}

std::vector<std::string> registered_strategies() {
  std::vector<std::string> names;
  for (const auto& [name, entry] : strategy_registry()) names.push_back(name);
  return names;
}

const StrategyTraits& strategy_traits(std::string_view name) {
  auto it = strategy_registry().find(std::string(name));
  if (it == strategy_registry().end()) {
    std::string known;
    for (const auto& [n, entry] : strategy_registry()) known += (known.empty() ? "" : ", ") + n;
    throw Error(Error::Kind::invalid_argument,
                "unknown strategy " + quoted_input(name) + " (this build has: " + known + ")");
  }
  return it->second.traits;
}

void check_strategy(std::string_view name, const ParallelConfig& config, Memory memory, Precision precision) {
  const StrategyTraits& traits = strategy_traits(name);
  const auto refuse = [&](const std::string& why) {
    return Error(Error::Kind::invalid_argument, std::string(name) + " does not run " + config.describe() + ": " + why);
  };
  if ((config.dp > 1 && !traits.dp) || (config.tp > 1 && !traits.tp) || (config.pp > 1 && !traits.pp)) {
    throw refuse("a dimension it does not split");
  }
  if (config.zero != traits.zero && !(traits.zero1_option && config.zero == 1)) throw refuse("ZeRO stage");
  if (config.microbatches < 1) throw refuse("micro-batches must be >= 1");
  if (traits.servers != (config.servers > 0)) throw refuse(traits.servers ? "no servers" : "servers it does not have");
  if ((config.staleness > 0 && !traits.staleness) || (config.backup > 0 && !traits.backup)) {
    throw refuse("a staleness or backup key it does not take");
  }
  if (config.has_straggler() && !traits.straggler) {
    std::string slowed;
    for (const auto& [n, entry] : strategy_registry()) {
      if (entry.traits.straggler) slowed += (slowed.empty() ? "" : ", ") + n;
    }
    throw Error(Error::Kind::unsupported, std::string(name) + " does not slow its compute for --straggler (these do: " + slowed + ")");
  }
  if (memory == Memory::host) return;
  const Registered& entry = strategy_registry().find(std::string(name))->second;
  if (!entry.device_factory) {
    std::string device;
    for (const auto& n : device_strategies()) device += (device.empty() ? "" : ", ") + n;
    throw Error(Error::Kind::unsupported, std::string(name) + " keeps its tensors in host memory, and the backend " +
                                              "takes device memory (on the device: " + device + ")");
  }
  if (precision == Precision::f64) {
    throw Error(Error::Kind::unsupported, std::string(name) + " on the device computes in f32 and bf16 (the device's "
                                              "kernels are f32); f64 runs on a host backend");
  }
}

std::unique_ptr<Strategy> make_strategy(std::string_view name, const ModelSpec& spec, const ParallelConfig& config,
                                        ProcessGroups& groups, Precision precision) {
  strategy_traits(name);  // an unknown name first, naming the known ones
  if (!groups.world || groups.world->size() != config.world()) {
    throw Error(Error::Kind::invalid_argument, std::string(name) + " does not run " + config.describe() +
                                                   ": process groups of another layout");
  }
  const Memory memory = groups.world->memory();
  check_strategy(name, config, memory, precision);
  const Registered& entry = strategy_registry().find(std::string(name))->second;
  if (memory != Memory::host) return entry.device_factory(spec, config, groups, precision);
  return entry.factory(spec, config, groups, precision);
}

std::vector<double> same_order_run(const ModelSpec& spec, const TrainConfig& train, Precision precision, int steps,
                                   int64_t batch_rows, int microbatches) {
  const auto run = [&](auto trainer) {
    std::vector<double> losses;
    for (int s = 0; s < steps; ++s) {
      losses.push_back(trainer.step_accumulated(make_batch(spec, static_cast<int64_t>(s) * batch_rows, batch_rows),
                                                microbatches));
    }
    std::vector<double> result = trainer.parameters();
    result.insert(result.end(), losses.begin(), losses.end());
    return result;
  };
  if (precision == Precision::f64) return run(SingleTrainer<double>(spec, train));
  return run(SingleTrainer<float>(spec, train, compute_of(precision)));
}

std::pair<int64_t, int64_t> even_split(int64_t rows, int parts, int part) {
  if (parts < 1 || part < 0 || part >= parts) throw Error(Error::Kind::invalid_argument, "even_split: bad part");
  const int64_t base = rows / parts, extra = rows % parts;
  const int64_t first = part * base + std::min<int64_t>(part, extra);
  return {first, base + (part < extra ? 1 : 0)};
}

double global_mean_loss(Communicator& comm, double local_loss_sum, int64_t global_rows) {
  double total = 0;
  if (comm.memory() == Memory::host) {
    comm.all_reduce(&local_loss_sum, &total, 1, DType::f64, ReduceOp::sum);
  } else {
    // A device backend reduces device memory: the one value travels through a Buffer.
    Buffer word(comm.memory(), sizeof(double));
    word.copy_from_host(&local_loss_sum, sizeof(double));
    comm.all_reduce(word.data(), word.data(), 1, DType::f64, ReduceOp::sum);
    comm.synchronize();
    word.copy_to_host(&total, sizeof(double));
  }
  return total / static_cast<double>(global_rows);
}

Batch slice_batch(const Batch& batch, int64_t first, int64_t count) {
  if (first < 0 || count < 0 || first + count > batch.size) throw Error(Error::Kind::invalid_argument, "slice_batch: out of range");
  const int64_t features = batch.size > 0 ? static_cast<int64_t>(batch.x.size()) / batch.size : 0;
  Batch out;
  out.first = batch.first + first;
  out.size = count;
  out.x.assign(batch.x.begin() + first * features, batch.x.begin() + (first + count) * features);
  out.labels.assign(batch.labels.begin() + first, batch.labels.begin() + first + count);
  return out;
}

}  // namespace dts

// Helpers shared by strategies: batch slicing and even splits.
#include "strategies/strategy.h"

#include <map>

#include "core/error.h"

namespace dts {

namespace {
std::map<std::string, StrategyFactory>& strategy_registry() {
  static std::map<std::string, StrategyFactory> registry;
  return registry;
}
}  // namespace

bool register_strategy(std::string name, StrategyFactory factory) {
  strategy_registry()[std::move(name)] = std::move(factory);
  return true;
}

std::vector<std::string> registered_strategies() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : strategy_registry()) names.push_back(name);
  return names;
}

std::unique_ptr<Strategy> make_strategy(std::string_view name, const ModelSpec& spec, const ParallelConfig& config,
                                        Communicator& comm, Precision precision) {
  auto it = strategy_registry().find(std::string(name));
  if (it == strategy_registry().end()) {
    std::string known;
    for (const auto& [n, f] : strategy_registry()) known += (known.empty() ? "" : ", ") + n;
    throw Error(Error::Kind::invalid_argument,
                "unknown strategy '" + std::string(name) + "' (this build has: " + known + ")");
  }
  return it->second(spec, config, comm, precision);
}

std::pair<int64_t, int64_t> even_split(int64_t rows, int parts, int part) {
  if (parts < 1 || part < 0 || part >= parts) throw Error(Error::Kind::invalid_argument, "even_split: bad part");
  const int64_t base = rows / parts, extra = rows % parts;
  const int64_t first = part * base + std::min<int64_t>(part, extra);
  return {first, base + (part < extra ? 1 : 0)};
}

double global_mean_loss(Communicator& comm, double local_loss_sum, int64_t global_rows) {
  double total = 0;
  comm.all_reduce(&local_loss_sum, &total, 1, DType::f64, ReduceOp::sum);
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

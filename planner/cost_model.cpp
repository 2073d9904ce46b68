// The planner's cost model (cost_model.h).
#include "planner/cost_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <tuple>

#include "core/error.h"
#include "results/record.h"
#include "strategies/ddp/ddp_strategy.h"
#include "strategies/gossip/gossip_strategy.h"
#include "strategies/hybrid/hybrid_strategy.h"
#include "strategies/ps/ps_strategy.h"
#include "strategies/strategy_spec.h"
#include "strategies/tensor/parallel_mlp.h"
#include "strategies/zero/zero_strategy.h"
#include "suites/memory_fit.h"

namespace dts::planner {

namespace {

constexpr DType kTrainingDtype = DType::f32;  // what the strategies train in (the scaling suite's rows)

bool is_data_parallel(std::string_view s) { return s == "ddp" || s == "zero1" || s == "zero2" || s == "zero3"; }
bool is_layered(std::string_view s) { return s == "tp" || s == "gpipe" || s == "1f1b" || s == "hybrid"; }
bool is_parameter_server(std::string_view s) {
  return s == "ps-sync" || s == "ps-async" || s == "ps-ssp" || s == "ps-backup";
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Optimizer state per parameter: AdamW's m and v, SGD's velocity.
int optimizer_copies(const ParallelConfig& layout) { return layout.train.optimizer == OptimizerKind::adamw ? 2 : 1; }

// What the prediction of one layout accumulates as it prices calls.
struct Pricing {
  const Measurements& m;
  const ParallelConfig& layout;
  const ClusterShape& cluster;
  std::set<std::string> extrapolated, extended;
  // group_shape walks every group of the layout (O(ranks)): once per group kind and layout, not
  // once per call priced.
  std::map<std::string, GroupShape, std::less<>> shapes;

  const GroupShape& shape_of(const std::string& group) {
    auto it = shapes.find(group);
    if (it == shapes.end()) it = shapes.emplace(group, group_shape(layout, group, cluster.ranks_per_node)).first;
    return it->second;
  }

  // The fit of `collective` on `shape`: measured, or (ClusterShape::extend) extended from a
  // measured shape, named; else the measurements' refusal.
  AlphaBetaFit fit_of(const std::string& collective, const std::string& dtype, const GroupShape& shape) {
    try {
      return m.collective(collective, dtype, shape);
    } catch (const Error&) {
      std::string from;
      if (!cluster.extend) throw;
      const std::optional<AlphaBetaFit> fit = m.extended(collective, dtype, shape, from);
      if (!fit) throw;
      extended.insert(from);
      return *fit;
    }
  }

  // A message's seconds by its link class, bytes and count: the parameter servers and gossip
  // price the same few sizes many times, each once here.
  std::map<std::tuple<bool, int64_t, int64_t>, double> messages;

  double seconds(const PlannedCall& call) {
    if (call.collective == "send_recv") {
      const int r = std::max(1, cluster.ranks_per_node);
      const bool same_node = call.from / r == call.to / r;
      const std::tuple<bool, int64_t, int64_t> key{same_node, call.bytes, call.count};
      if (auto it = messages.find(key); it != messages.end()) return it->second;
      const std::string link(same_node ? kSameNode : kOtherNode);
      const double priced_seconds = priced(m.link(link), call, "point-to-point " + link);  // may throw: cached after
      messages.emplace(key, priced_seconds);
      return priced_seconds;
    }
    // A collective of one rank moves nothing (the loss of a one-rank layout).
    if (call.group_size < 2) return 0;
    const GroupShape& shape = shape_of(call.group);
    std::string dtype(name(call.dtype));
    if (call.loss) {
      // One f64 word: priced as the same 8 bytes in the training dtype where f64 was not measured
      // (at 8 bytes a call is its latency, whatever it reduces).
      try {
        return priced(fit_of(call.collective, dtype, shape), call, call.collective + " " + dtype + " on " + shape.text());
      } catch (const Error&) {
        dtype = name(kTrainingDtype);
      }
    }
    return priced(fit_of(call.collective, dtype, shape), call, call.collective + " " + dtype + " on " + shape.text());
  }

  double priced(const AlphaBetaFit& fit, const PlannedCall& call, const std::string& what) {
    const auto bytes = static_cast<double>(call.bytes);
    if (!fit.covers(bytes)) {
      extrapolated.insert(what + " at " + format_bytes(bytes) + " (measured " + format_bytes(fit.pieces.front().first_bytes) +
                          " to " + format_bytes(fit.pieces.back().last_bytes) + ")");
    }
    return static_cast<double>(call.count) * fit.seconds(bytes);
  }

  // Seconds of a rank's compute: `micro_batches` micro-batches of `rows` rows, each of `flops`
  // FLOPs, at the rate measured at that many rows (Measurements::compute_rate). CPU ranks share
  // their node's cores (one BLAS thread each): when more of them compute at once than it has
  // cores, each is stretched by computing / cores; `active` is the fraction of the node's ranks
  // computing at once (a pipeline's stages take turns; parameter servers wait while their workers
  // compute). The node planned is taken to have the measured one's cores.
  double compute(double flops, int64_t rows, int micro_batches, std::string_view strategy, double active = 1) {
    const auto [fewest, most] = m.compute_rows();
    const double rate = m.compute_rate(rows, strategy);
    if (rows < fewest || rows > most) {
      extrapolated.insert("compute at " + std::to_string(rows) + " rows a micro-batch (measured " +
                          std::to_string(fewest) + " to " + std::to_string(most) + ")");
    }
    const double computing = active * cluster.ranks_per_node;
    const double stretch = m.compute_cores() > 0 ? std::max(1.0, computing / m.compute_cores()) : 1.0;
    return stretch * micro_batches * flops * rate;
  }

  // Seconds of an optimizer step alone over `parameter_share` of the model (a parameter server's
  // update of its range): the intercept of the line of one rank's step time against its FLOPs
  // (what a step costs whatever its rows; an upper bound on its optimizer's pass) in that share.
  // With one row count measured there is no line: the update is left out, and said.
  double update(double parameter_share) {
    try {
      return m.compute().pieces.front().alpha * parameter_share;
    } catch (const Error&) {
      extrapolated.insert("a server's update not priced (one-rank ddp steps at one batch size: no line through them)");
      return 0;
    }
  }

  // Point-to-point messages priced on their links and charged to what they pass through: a
  // message inside a node to the sender's end out and the receiver's end in (shared memory: the
  // processes copy, one message at a time each way; a rank sends and receives at once), a
  // message between nodes to the sending node's link out and the receiving node's link in (each
  // node's link carries its messages one at a time each way, whichever ranks send them).
  // Keys: (rank_out, r), (rank_in, r), (node_out, n), (node_in, n); (server, j) for a server's
  // end as ps-async takes it.
  enum class End : uint8_t { rank_out, rank_in, node_out, node_in, server };
  using Loads = std::map<std::pair<End, int>, double>;
  Loads loads(const std::vector<PlannedCall>& calls) {
    Loads l;
    const int per_node = std::max(1, cluster.ranks_per_node);
    for (const PlannedCall& call : calls) {
      const double t = seconds(call);
      const int from_node = call.from / per_node, to_node = call.to / per_node;
      if (from_node == to_node) {
        l[{End::rank_out, call.from}] += t;
        l[{End::rank_in, call.to}] += t;
      } else {
        l[{End::node_out, from_node}] += t;
        l[{End::node_in, to_node}] += t;
      }
    }
    return l;
  }
  static double busiest(const Loads& l) {
    double most = 0;
    for (const auto& [what, seconds] : l) most = std::max(most, seconds);
    return most;
  }

  // busiest(loads(messages)) of messages sent at once (a pipeline stage's sends, gossip's
  // exchange), charged as loads() charges them but in arrays over the layout's ranks and nodes:
  // O(ranks) a layout, no map. charge() takes the `group` messages of `calls`, moved by `shift`
  // ranks (another replica's sends are its class's moved).
  struct SentAtOnce {
    std::vector<double> rank_out, rank_in, node_out, node_in;
    SentAtOnce(int ranks, int per_node)
        : rank_out(static_cast<size_t>(ranks)), rank_in(static_cast<size_t>(ranks)),
          node_out(static_cast<size_t>(ceil_div(ranks, per_node))), node_in(node_out.size()) {}
  };
  void charge(SentAtOnce& l, const std::vector<PlannedCall>& calls, std::string_view group, int shift = 0) {
    const int per_node = std::max(1, cluster.ranks_per_node);
    for (const PlannedCall& call : calls) {
      if (call.group != group) continue;
      PlannedCall moved = call;
      moved.from += shift;
      moved.to += shift;
      const double t = seconds(moved);  // priced once per link class and size (messages)
      const int from_node = moved.from / per_node, to_node = moved.to / per_node;
      if (from_node == to_node) {
        l.rank_out[static_cast<size_t>(moved.from)] += t;
        l.rank_in[static_cast<size_t>(moved.to)] += t;
      } else {
        l.node_out[static_cast<size_t>(from_node)] += t;
        l.node_in[static_cast<size_t>(to_node)] += t;
      }
    }
  }
  static double busiest(const SentAtOnce& l) {
    double most = 0;
    for (const std::vector<double>* v : {&l.rank_out, &l.rank_in, &l.node_out, &l.node_in}) {
      for (double seconds : *v) most = std::max(most, seconds);
    }
    return most;
  }
};

double sum_calls(Pricing& pricing, const std::vector<PlannedCall>& calls, std::string_view group) {
  double total = 0;
  for (const PlannedCall& call : calls) {
    if (call.group == group) total += pricing.seconds(call);
  }
  return total;
}

// The parameter servers are priced message by message (each end and link they pass through):
// every worker's header and range to every server and the replies, 4 S W messages a layout, and
// a plan takes every S from 1 to N - 1, about 2/3 N^3 messages in all. A strategy whose layouts
// hold more than this is left out of the plan, and said (pinning servers=S prices one layout).
constexpr double kMaxPricedMessages = double{1 << 22};

// Why the parameter server `spec` is not planned on `ranks` ranks, or "" when the messages of its
// layouts that have rows for every worker (those plan_layouts prices) fit kMaxPricedMessages.
std::string too_many_messages(const StrategySpec& spec, int ranks, const LayoutDefaults& defaults, int64_t batch) {
  double messages = 0;
  size_t priced = 0;
  for (const ParallelConfig& layout : layouts_of(spec, ranks, defaults)) {
    if (batch < static_cast<int64_t>(layout.dp) * layout.microbatches) continue;
    messages += 4.0 * layout.servers * layout.dp;
    ++priced;
  }
  if (messages <= kMaxPricedMessages) return "";
  return std::to_string(priced) + " layouts on " + std::to_string(ranks) + " ranks send " +
         format_number(messages, "%.3g") + " messages a step (every worker to every server), over the " +
         std::to_string(static_cast<int64_t>(kMaxPricedMessages)) +
         " the planner prices one by one; pin servers=S (e.g. " + spec.name + "(servers=8)) or plan fewer ranks";
}

// Activation bytes one micro-batch of `rows` keeps on a stage: its input and every layer's output
// (f32), as this rank holds them.
double activation_bytes(const StageLayout& stage, int64_t rows) {
  int64_t per_row = stage.layers.front().in_local;
  for (const LocalLayer& layer : stage.layers) per_row += layer.out_local;
  return static_cast<double>(rows * per_row) * static_cast<double>(size_of(kTrainingDtype));
}

}  // namespace

double forward_flops(const ModelSpec& spec, int64_t rows, int first, int end, int tp, int tp_rank) {
  if (end < 0) end = spec.layers;
  double flops = 0;
  // A column-parallel layer reads the whole input and writes its outputs; a row-parallel one
  // reads its input features and writes a partial sum of every output.
  for (const LocalLayer& layer : stage_layout(spec, first, end, tp, tp_rank, /*with_runs=*/false).layers) {
    flops += 2 * static_cast<double>(rows) * static_cast<double>(layer.in_local) * static_cast<double>(layer.out_local);
  }
  return flops;
}

double training_flops(const ModelSpec& spec, int64_t rows, int first, int end, int tp, int tp_rank) {
  if (end < 0) end = spec.layers;
  double flops = 3 * forward_flops(spec, rows, first, end, tp, tp_rank);
  if (first == 0) flops -= forward_flops(spec, rows, 0, 1, tp, tp_rank);  // no gradient of the model's input
  return flops;
}

double step_flops(std::string_view strategy, const ModelSpec& spec, int64_t rows) {
  return training_flops(spec, rows) + (strategy == "zero3" ? forward_flops(spec, rows) : 0);
}

std::string layout_text(const std::string& strategy, const ParallelConfig& layout) {
  return layout_id(parse_strategy_spec(strategy), layout) +
         (strategy == "hybrid" && layout.pp > 1 ? "-" + std::string(name(layout.schedule)) : "");
}

std::vector<std::string> planned_strategies() {
  return {"ddp", "zero1", "zero2", "zero3", "tp", "gpipe", "1f1b", "hybrid", "ps-sync", "ps-async", "ps-ssp", "ps-backup", "gossip"};
}

bool planned_strategy(std::string_view strategy) {
  return is_data_parallel(strategy) || is_layered(strategy) || is_parameter_server(strategy) || strategy == "gossip";
}

GroupShape group_shape(const ParallelConfig& layout, std::string_view group, int ranks_per_node) {
  // Every group of the kind, by its members' layout ranks (pp * dp + d) * tp + t: O(ranks) in
  // all, nothing allocated. A group's members rise in rank, so its nodes (rank / ranks_per_node)
  // come in runs: the runs are its nodes, the longest its most ranks on one.
  const int dp = layout.dp, tp = layout.tp, pp = layout.pp, per_node = std::max(1, ranks_per_node);
  const auto rank = [&](int p, int d, int t) { return (p * dp + d) * tp + t; };
  // The group spanning the most nodes (then the most ranks on one of them): its calls are the
  // slowest, and the step waits for them.
  GroupShape worst;
  const auto judge = [&](int size, const auto& member) {
    int nodes = 0, most = 0, run = 0, last = -1;
    for (int i = 0; i < size; ++i) {
      const int node = member(i) / per_node;
      run = node == last ? run + 1 : 1;
      nodes += node != last;
      last = node;
      most = std::max(most, run);
    }
    const GroupShape shape{size, nodes, most};
    if (worst.ranks == 0 || std::tie(shape.nodes, shape.ranks_per_node) > std::tie(worst.nodes, worst.ranks_per_node)) {
      worst = shape;
    }
  };
  if (group == "tp") {
    for (int p = 0; p < pp; ++p) {
      for (int d = 0; d < dp; ++d) judge(tp, [&](int t) { return rank(p, d, t); });
    }
  } else if (group == "dp") {
    for (int p = 0; p < pp; ++p) {
      for (int t = 0; t < tp; ++t) judge(dp, [&](int d) { return rank(p, d, t); });
    }
  } else if (group == "pp") {
    for (int d = 0; d < dp; ++d) {
      for (int t = 0; t < tp; ++t) judge(pp, [&](int p) { return rank(p, d, t); });
    }
  } else {
    judge(dp * tp * pp, [](int r) { return r; });
  }
  return worst.normalized();
}

LayoutPrediction predict(const std::string& strategy, const ParallelConfig& layout, const ModelSpec& spec,
                         int64_t batch, const ClusterShape& cluster, const Measurements& m) {
  LayoutPrediction p;
  p.strategy = strategy;
  p.layout = layout;
  Pricing pricing{m, layout, cluster, {}, {}, {}, {}};
  const double element = static_cast<double>(size_of(kTrainingDtype));
  const StageLayout whole = stage_layout(spec, 0, spec.layers, 1, 0, /*with_runs=*/false);
  const auto psi = static_cast<double>(whole.count);
  const int k = optimizer_copies(layout);
  if (is_data_parallel(strategy)) {
    const int n = layout.dp, mb = layout.microbatches;
    const int64_t rows = ceil_div(batch, n);  // the fullest rank's
    const int64_t mb_rows = ceil_div(rows, mb);
    p.compute = pricing.compute(step_flops(strategy, spec, mb_rows), mb_rows, mb, strategy);
    std::vector<PlannedCall> calls;
    if (strategy == "ddp") {
      const BucketPlan buckets = plan_buckets(parameter_layout(spec), size_of(kTrainingDtype), layout.bucket_bytes);
      calls = ddp_calls(buckets, n, kTrainingDtype);
    } else {
      const auto stage = static_cast<ZeroStage>(strategy.back() - '0');
      calls = zero_calls(stage, mb, n, ceil_div(static_cast<int64_t>(psi), n), kTrainingDtype);
    }
    double overlapping = 0, blocking = 0, loss = 0;
    for (const PlannedCall& call : calls) {
      (call.loss ? loss : call.overlaps_backward ? overlapping : blocking) += pricing.seconds(call);
    }
    // Backward is 2 of a layer's 3 matrix products: the window the last micro-batch's buckets run in.
    const double window = p.compute / mb * 2 / 3;
    p.exposed["dp"] = std::max(0.0, overlapping - window) + blocking;
    p.exposed["world"] = loss;  // the dp group is the world here
    p.step_time = p.compute + p.exposed.at("dp") + loss;
    // Held between steps (the ZeRO model), plus one micro-batch's activations.
    const double shard = std::ceil(psi / n);
    const double params = strategy == "zero3" ? shard : psi;
    const double grads = (strategy == "ddp" || strategy == "zero1") ? psi : shard;
    const double optimizer = strategy == "ddp" ? k * psi : k * shard;
    p.memory = (params + grads + optimizer) * element + activation_bytes(whole, ceil_div(rows, mb));
  } else if (is_layered(strategy)) {
    const int mb = layout.microbatches, stages = layout.pp;
    const int64_t replica_rows = ceil_div(batch, layout.dp), mb_rows = ceil_div(replica_rows, mb);
    const std::vector<int> bounds = balanced_stages(spec, stages);
    // The stages take turns: each is busy m of the m + p - 1 slots of a balanced pipeline, so on
    // average m / (m + p - 1) of the ranks compute at once.
    const double active = static_cast<double>(mb) / (mb + stages - 1);
    // Per stage, its slowest tp rank's slot: one micro-batch's compute, tp all_reduces and sends
    // (the stage's, charged to what they pass through: the ranks' ends, the nodes' links).
    // The first micro-batch passes every stage; the other m - 1 follow at the slowest stage's pace:
    // T = sum_s slot_s + (m - 1) max_s slot_s, the bubble being what the slowest stage waits,
    // sum_s slot_s - max_s slot_s ((p - 1) slot when the stages are balanced).
    double sum_of_slots = 0, slowest = -1, after_schedule = 0;
    for (int s = 0; s < stages; ++s) {
      double stage_slot = -1;
      // The stage's sends, every dp and tp rank's at once: where the stage boundary crosses
      // nodes, they share the node's link. The first replica's calls price each tp rank's slot.
      // A rank's calls depend on its replica d only through the replica's rows (even_split: the
      // first batch % dp replicas hold one row more) and the ranks its sends pass between (tp
      // apart per replica): hybrid_calls runs once per class and tp rank, and the other replicas'
      // sends are the class's own moved. O(tp) calls built and O(ranks x m) sends per stage.
      Pricing::SentAtOnce stage_sends(layout.dp * layout.tp * layout.pp, std::max(1, cluster.ranks_per_node));
      const int longer = static_cast<int>(batch % layout.dp);
      std::vector<std::array<std::vector<PlannedCall>, 2>> by_class(static_cast<size_t>(layout.tp));
      for (int d = 0; d < layout.dp; ++d) {
        const int kind = d < longer ? 0 : 1, first_of_kind = d < longer ? 0 : longer;
        for (int t = 0; t < layout.tp; ++t) {
          std::vector<PlannedCall>& calls = by_class[static_cast<size_t>(t)][static_cast<size_t>(kind)];
          if (d == first_of_kind) calls = hybrid_calls(spec, layout, s, t, d, batch, kTrainingDtype, kTrainingDtype);
          pricing.charge(stage_sends, calls, "pp", (d - first_of_kind) * layout.tp);
        }
      }
      const double pp = Pricing::busiest(stage_sends);
      std::vector<std::vector<PlannedCall>> first_replica;  // replica 0's, per tp rank
      for (auto& kinds : by_class) first_replica.push_back(std::move(kinds[longer > 0 ? 0 : 1]));
      for (int t = 0; t < layout.tp; ++t) {
        const int first = bounds[static_cast<size_t>(s)], end = bounds[static_cast<size_t>(s) + 1];
        const std::vector<PlannedCall>& calls = first_replica[static_cast<size_t>(t)];
        const StageLayout stage = stage_layout(spec, first, end, layout.tp, t, /*with_runs=*/false);
        const double compute =
            pricing.compute(training_flops(spec, mb_rows, first, end, layout.tp, t), mb_rows, mb, strategy, active);
        const double tp = sum_calls(pricing, calls, "tp");
        const double slot = (compute + tp + pp) / mb;
        double optimizer = k * static_cast<double>(stage.count);
        if (layout.zero == 1) optimizer = k * std::ceil(static_cast<double>(stage.count) / layout.dp);
        const int in_flight = layout.schedule == PipelineSchedule::gpipe         ? mb
                              : layout.schedule == PipelineSchedule::one_f_one_b ? std::min(mb, stages - s)
                                                                                 : 1;
        const double memory = (2.0 * static_cast<double>(stage.count) + optimizer) * element +
                              in_flight * activation_bytes(stage, ceil_div(replica_rows, mb));
        p.memory = std::max(p.memory, memory);
        stage_slot = std::max(stage_slot, slot);
        // After the schedule, every rank's dp calls and the loss: the step waits for the longest.
        const double dp = sum_calls(pricing, calls, "dp"), world = sum_calls(pricing, calls, "world");
        if (dp + world > after_schedule) {
          after_schedule = dp + world;
          p.exposed["dp"] = dp;
          p.exposed["world"] = world;
        }
        if (slot <= slowest) continue;
        slowest = slot;
        p.compute = compute;
        p.exposed["tp"] = tp;
        p.exposed["pp"] = pp;
      }
      sum_of_slots += stage_slot;
    }
    p.bubble = sum_of_slots - slowest;
    p.step_time = p.compute + p.bubble;
    for (const auto& [group, seconds] : p.exposed) p.step_time += seconds;
  } else if (is_parameter_server(strategy)) {
    // S servers (ranks 0..S-1) hold a range each; W workers compute their rows' gradient of the
    // whole model (no optimizer step: the servers make it), push it by range and wait for the
    // ranges back (ps_calls). The servers only wait while the workers compute.
    const int servers = layout.servers, workers = layout.dp, n = servers + workers;
    const int64_t rows = ceil_div(batch, workers);
    p.compute = pricing.compute(training_flops(spec, rows), rows, 1, strategy, static_cast<double>(workers) / n);
    const double largest_range = static_cast<double>(even_split(static_cast<int64_t>(psi), servers, 0).second);
    const double update = pricing.update(largest_range / psi);  // one optimizer step of the largest range
    // Worker w's pushes (to every server) and the replies it gets (from every server).
    std::vector<std::vector<PlannedCall>> pushes(static_cast<size_t>(workers)), replies(static_cast<size_t>(workers));
    for (int r = 0; r < n; ++r) {
      for (const PlannedCall& call : ps_calls(static_cast<int64_t>(psi), servers, workers, r, kTrainingDtype)) {
        if (r >= servers) pushes[static_cast<size_t>(r - servers)].push_back(call);
        else replies[static_cast<size_t>(call.to - servers)].push_back(call);
      }
    }
    // A worker's own round trip, alone: its pushes, the update, the replies.
    std::vector<double> round_trip(static_cast<size_t>(workers));
    for (size_t w = 0; w < round_trip.size(); ++w) {
      round_trip[w] = Pricing::busiest(pricing.loads(pushes[w])) + update + Pricing::busiest(pricing.loads(replies[w]));
    }
    if (strategy == "ps-sync" || strategy == "ps-backup") {
      // A round: compute, every push at once (each end and link taking its messages in turn),
      // the update, every reply. ps-backup's update waits for the W - b first gradients: the b
      // workers of the longest round trips are left out of the round (measured on two nodes: a
      // late worker's push and reply did not hold the step).
      std::vector<size_t> order(round_trip.size());
      for (size_t w = 0; w < order.size(); ++w) order[w] = w;
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return round_trip[a] < round_trip[b]; });
      const size_t dropped = strategy == "ps-backup" ? static_cast<size_t>(std::max(0, layout.backup)) : 0;
      const size_t counted = order.size() - std::min(dropped, order.size() - 1);  // at least one gradient
      std::vector<PlannedCall> push_phase, reply_phase;
      for (size_t i = 0; i < counted; ++i) {
        push_phase.insert(push_phase.end(), pushes[order[i]].begin(), pushes[order[i]].end());
        reply_phase.insert(reply_phase.end(), replies[order[i]].begin(), replies[order[i]].end());
      }
      p.exposed["ps"] = Pricing::busiest(pricing.loads(push_phase)) + update + Pricing::busiest(pricing.loads(reply_phase));
      p.step_time = p.compute + p.exposed.at("ps");
    } else {
      // ps-async, ps-ssp: no round. Worker w cycles in c_w = compute + its round trip, unless
      // what its messages pass through (an end, a node's link; a server's end also makes an
      // update per push) is busier than it can be: an end or link loaded rho = sum over its
      // workers of their seconds there / c_w > 1 stretches the cycles of the workers using it
      // by rho. The step the scaling suite reports for a free-running layout is the global batch
      // over the rows trained per second, batch / sum_w rows_w / c_w: a worker near its server
      // counts for its rate. ps-ssp lets none run more than s steps ahead of the slowest: in a
      // long run every worker keeps the slowest's pace, max_w c_w.
      std::vector<double> cycle(round_trip.size());
      std::vector<Pricing::Loads> own(round_trip.size());
      Pricing::Loads rho;
      for (size_t w = 0; w < cycle.size(); ++w) {
        cycle[w] = p.compute + round_trip[w];
        std::vector<PlannedCall> messages = pushes[w];
        messages.insert(messages.end(), replies[w].begin(), replies[w].end());
        // A server's end takes in, updates and answers in one process: one resource.
        for (const auto& [what, seconds] : pricing.loads(messages)) {
          const bool server_end =
              (what.first == Pricing::End::rank_out || what.first == Pricing::End::rank_in) && what.second < servers;
          own[w][server_end ? std::make_pair(Pricing::End::server, what.second) : what] += seconds;
        }
        for (int j = 0; j < servers; ++j) own[w][{Pricing::End::server, j}] += update;
        for (const auto& [what, seconds] : own[w]) rho[what] += seconds / cycle[w];
      }
      double rate = 0, slowest = 0;
      for (size_t w = 0; w < cycle.size(); ++w) {
        double stretch = 1;
        for (const auto& [what, seconds] : own[w]) stretch = std::max(stretch, rho.at(what));
        cycle[w] *= stretch;
        rate += static_cast<double>(even_split(batch, workers, static_cast<int>(w)).second) / cycle[w];
        slowest = std::max(slowest, cycle[w]);
      }
      p.step_time = strategy == "ps-ssp" ? slowest : static_cast<double>(batch) / rate;
      p.exposed["ps"] = p.step_time - p.compute;
    }
    // A server: its range, one receive and one reply buffer per worker, the summing scratch, the
    // optimizer state (ps-backup: one older version kept for a late worker). A worker: the whole
    // model and its gradient, and its rows' activations.
    const double versions = strategy == "ps-backup" ? 2 : 1;
    const double server = largest_range * (versions + 2.0 * workers + 1 + k) * element;
    const double worker = 2 * psi * element + activation_bytes(whole, rows);
    p.memory = std::max(server, worker);
  } else if (strategy == "gossip") {
    // Every rank computes its rows' gradient and steps its own optimizer, then exchanges its
    // parameters with its ring neighbours (gossip_calls), receiving one model from each.
    const int n = layout.dp;
    const int64_t rows = ceil_div(batch, n);
    p.compute = pricing.compute(training_flops(spec, rows), rows, 1, strategy);
    Pricing::SentAtOnce sent(n, std::max(1, cluster.ranks_per_node));
    for (int r = 0; r < n; ++r) pricing.charge(sent, gossip_calls(static_cast<int64_t>(psi), n, r, kTrainingDtype), "ring");
    // Every rank sends at once: the busiest end or node link sets the exchange's time.
    const double exchange = Pricing::busiest(sent);
    if (n > 1) p.exposed["ring"] = exchange;
    p.step_time = p.compute + exchange;
    // Its model and, from two ranks, its two neighbours' (held while it mixes), its gradient, its
    // optimizer state.
    p.memory = ((n > 1 ? 3 : 1) + 1 + k) * psi * element + activation_bytes(whole, rows);
  } else {
    throw Error(Error::Kind::unsupported, strategy + ": the planner has no cost model of it");
  }
  // Only the groups the layout communicates in (a group of one rank has no calls).
  if (layout.tp == 1) p.exposed.erase("tp");
  if (layout.pp == 1) p.exposed.erase("pp");
  if (layout.dp == 1) p.exposed.erase("dp");
  if (layout.dp * layout.tp * layout.pp == 1) p.exposed.erase("world");
  p.over_memory = cluster.memory_per_rank > 0 && p.memory > cluster.memory_per_rank;
  p.extrapolated.assign(pricing.extrapolated.begin(), pricing.extrapolated.end());
  p.extended.assign(pricing.extended.begin(), pricing.extended.end());
  return p;
}

Plan plan_layouts(const ModelSpec& spec, int64_t batch, const ClusterShape& cluster,
                  const std::vector<std::string>& strategies, const Measurements& m, const TrainConfig& train) {
  Plan plan;
  std::vector<LayoutPrediction>& out = plan.layouts;
  for (const std::string& text : strategies) {
    const StrategySpec spec_of = parse_strategy_spec(text);
    if (!planned_strategy(spec_of.name)) {
      throw Error(Error::Kind::invalid_argument, spec_of.name + ": the planner has no cost model of it; leave it out");
    }
    std::set<std::string> seen;
    LayoutDefaults base;
    base.layers = spec.layers;
    base.width = spec.width;
    if (const std::string why = why_no_layout(spec_of, cluster.ranks, base); !why.empty()) {
      plan.without_layout.push_back(spec_of.text + ": " + why);
      continue;
    }
    if (is_parameter_server(spec_of.name)) {
      if (const std::string why = too_many_messages(spec_of, cluster.ranks, base, batch); !why.empty()) {
        plan.without_layout.push_back(spec_of.text + ": " + why);
        continue;
      }
    }
    for (const int mb : {1, 2, 4, 8, 16}) {
      LayoutDefaults defaults;
      defaults.microbatches = mb;
      defaults.layers = spec.layers;
      defaults.width = spec.width;
      for (ParallelConfig layout : layouts_of(spec_of, cluster.ranks, defaults)) {
        if (batch < static_cast<int64_t>(layout.dp) * layout.microbatches) continue;  // a micro-batch without rows
        if (!seen.insert(layout.describe()).second) continue;
        layout.train = train;
        out.push_back(predict(spec_of.name, layout, spec, batch, cluster, m));
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const LayoutPrediction& a, const LayoutPrediction& b) {
    if (a.over_memory != b.over_memory) return !a.over_memory;
    return a.step_time < b.step_time;
  });
  return plan;
}

}  // namespace dts::planner

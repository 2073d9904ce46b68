// The planner's cost model: a layout's step time and memory per rank, predicted from the stack's
// measurements (measurements.h) and each strategy's own account of what it does (its call plan,
// strategies/strategy.h PlannedCall: the calls its expected_traffic() is summed from).
//
//   compute   C = m F(r) c(r) per rank: m micro-batches of r rows, F(r) the training FLOPs of r
//             rows on its shard of the model (training_flops), c(r) the seconds per FLOP of one
//             rank's measured step at r rows (the scaling suite at one rank; between row counts
//             measured, linear in log r): a GEMM of few rows runs below the rate of many;
//   calls     t(call) = fit(collective, dtype, group shape)(bytes) per call, send_recv the
//             point-to-point line of its link class (same node or not);
//   ddp       T = C + max(0, sum t(overlapping) - W) + sum t(rest), W the backward of the last
//             micro-batch (2/3 of its compute): buckets run while backward computes, at their
//             measured speed (what it assumes: progress without the CPU's help);
//   zero      T = C (+ stage 3's second forward) + sum t(calls): blocking, nothing overlaps;
//   pipeline  per stage k a slot s_k = (C_k + tp calls_k + sends_k) / m; T = sum_k s_k + (m - 1)
//             max_k s_k (the first micro-batch passes every stage, the rest follow at the slowest
//             stage's pace), the bubble sum_k s_k - max_k s_k; then dp's calls and the loss;
//   messages  (pipeline sends, ps, gossip) each charged to what it passes through, one at a time: both ranks'
//             ends inside a node, the nodes' links between nodes; messages sent at once take as
//             long as their busiest end or link;
//   ps        (ps_calls) a worker's compute C, the server's update U (the intercept of one rank's
//             step time against its FLOPs, in its range's share): sync T = C + pushes + U +
//             replies; backup the same without the b workers of the longest round trips; async
//             worker w cycles in c_w = C + its round trip, stretched by the load of a busier end
//             or link, T = batch / sum_w rows_w / c_w (the free-running step); ssp max_w c_w;
//   gossip    (gossip_calls) T = C + the exchange with both neighbours at once;
//   memory    parameters, gradients and optimizer state per the ZeRO model, plus activations
//             (GPipe keeps all m micro-batches', 1F1B at most p - s); a server its range and a
//             buffer each way per worker; gossip three models while it mixes.
// What it ignores: contention between collectives of groups that share a link at the same time
// (the ps and gossip messages are charged to it), stragglers and
// noise, the optimizer's step apart (spread over the FLOPs of the steps measured, so charged once
// per micro-batch), compute speed that depends on a GEMM's width (a tp shard's narrower GEMMs
// take the whole model's rate at their rows).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "planner/measurements.h"
#include "strategies/strategy.h"

namespace dts::planner {

// FLOPs of one training step (forward, weight gradients, input gradients but the first layer's)
// of layers [first, end) of `spec` on `rows` rows, as one tp rank of `tp` holds them: 2 FLOPs per
// multiply-add, 3 matrix products per layer (2 for the model's first).
double training_flops(const ModelSpec& spec, int64_t rows, int first = 0, int end = -1, int tp = 1, int tp_rank = 0);
// The FLOPs a rank of `strategy` computes per step on `rows` rows of the whole model: its
// training_flops, and ZeRO-3's forward again (it gathers the parameters a second time for the
// backward and recomputes). The rate of a strategy's measured steps is taken against the same
// count.
double step_flops(std::string_view strategy, const ModelSpec& spec, int64_t rows);
// The forward's share: 2 FLOPs per multiply-add of each layer.
double forward_flops(const ModelSpec& spec, int64_t rows, int first = 0, int end = -1, int tp = 1, int tp_rank = 0);

// The cluster a plan is for: its ranks, how many per node, what a rank may hold.
struct ClusterShape {
  int ranks = 1, ranks_per_node = 1;
  double memory_per_rank = 0;  // bytes; 0: no limit
  // Group shapes the measurements lack are extended from measured ones (Measurements::extended)
  // rather than refused; each extension is named in the prediction.
  bool extend = false;
};

// One layout, predicted.
struct LayoutPrediction {
  std::string strategy;
  ParallelConfig layout;
  double compute = 0;                      // seconds: the slowest rank's (the slowest stage's)
  std::map<std::string, double> exposed;   // seconds of communication not hidden, per group (dp, tp, pp, world, ps, ring)
  double bubble = 0;                       // seconds: the pipeline's idle (p - 1) slots
  double step_time = 0;                    // seconds
  double memory = 0;                       // bytes, the fullest rank
  bool over_memory = false;
  std::vector<std::string> extrapolated;   // fits used outside the sizes they were measured at
  std::vector<std::string> extended;       // group shapes not measured, extended (ClusterShape::extend)
};

// The strategies the model prices: every registered one (ddp, zero1-3, tp, gpipe, 1f1b, hybrid,
// the parameter servers, gossip).
bool planned_strategy(std::string_view strategy);
// Those strategies, as a plan takes them by default.
std::vector<std::string> planned_strategies();

// Every layout of `strategies` on `cluster` for `spec` and a global batch of `batch` rows, each
// predicted; pipelines with m in {1, 2, 4, 8, 16} micro-batches (m no more than a replica's rows).
// Sorted by step time, those within the memory limit first. Error{invalid_argument}, one line,
// when a measurement a layout needs is missing (Measurements says which, and how to measure it).
// Its cost grows with the layouts it prices, not faster: per layout O(its calls), O(ranks) per
// group kind for the group's shape, O(ranks x m) per pipeline stage for its sends (each
// replica's sends are its class's moved) and O(ranks) for gossip's (charged in arrays over the
// ranks and nodes, no map), nothing per parameter
// (stage_layout without runs). The parameter servers alone price 4 S W messages a layout over S =
// 1 .. N - 1: a strategy whose layouts send more than 2^22 is left out, in without_layout.
struct Plan {
  std::vector<LayoutPrediction> layouts;
  std::vector<std::string> without_layout;  // "gpipe: 3 layers cannot be split into 4 pipeline stages ..."
};
// `train`: the optimizer the layouts train with (its state counts in memory).
Plan plan_layouts(const ModelSpec& spec, int64_t batch, const ClusterShape& cluster,
                  const std::vector<std::string>& strategies, const Measurements& m, const TrainConfig& train = {});

// One layout, predicted (what plan_layouts does for each).
LayoutPrediction predict(const std::string& strategy, const ParallelConfig& layout, const ModelSpec& spec,
                         int64_t batch, const ClusterShape& cluster, const Measurements& m);

// The layout's part of a case id: layout_id (strategy_spec.h), and hybrid's schedule where it has
// a pipeline ("dp2-tp1-pp2-mb8-1f1b").
std::string layout_text(const std::string& strategy, const ParallelConfig& layout);

// The shape of the groups of `group` ("dp", "tp", "pp", "world") under the layout's numbering
// (tp innermost, then dp, then pp) and ranks_per_node: of them all, the one spanning the most
// nodes (then with the most ranks on one), whose calls the step waits for.
GroupShape group_shape(const ParallelConfig& layout, std::string_view group, int ranks_per_node);

}  // namespace dts::planner

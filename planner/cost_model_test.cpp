// The cost model (cost_model.h) on measurements made of exact lines: each prediction must be the
// sum the README's equations give, computed here by hand from the same lines; the FLOP count
// against its closed form; a group the files lack refused with the command that measures it.
#include "planner/cost_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"
#include "strategies/ddp/ddp_strategy.h"
#include "strategies/ps/ps_strategy.h"
#include "strategies/gossip/gossip_strategy.h"
#include "strategies/strategy_spec.h"

namespace dts::planner {
namespace {

// The lines the synthetic measurements follow.
constexpr double kAlpha = 20e-6, kBeta = 2e9;                   // every collective
constexpr double kLinkAlpha = 5e-6, kLinkBeta = 4e9;            // same-node messages
constexpr double kComputeAlpha = 1e-3, kFlopRate = 1e9;         // 1 ms + FLOPs / 1 GFLOP/s

double collective_seconds(double bytes) { return kAlpha + bytes / kBeta; }
double compute_seconds(double flops) { return kComputeAlpha + flops / kFlopRate; }

Labels stack(int ranks, int nodes = 1) {
  Labels l;
  l.backend = "mpi";
  l.backend_version = l.mpi_version = "Open MPI v4.1.4";
  l.device = "cpu";
  l.world_size = ranks;
  l.nodes = nodes;
  l.ranks_per_node = ranks / nodes;
  return l;
}

Record row(const Labels& labels, const std::string& suite, const std::string& metric, double value) {
  Record r;
  r.suite = suite;
  r.metric = metric;
  r.labels = labels;
  r.value = value;
  r.verdict = Verdict::info;
  return r;
}

// Collectives on `ranks` ranks of one node (8 B to 64 MiB, x4), topology same-node messages, and
// one rank's ddp steps of `spec` at two batches.
std::vector<Record> measured(const std::vector<int>& groups, const ModelSpec& spec) {
  std::vector<Record> rows;
  for (int ranks : groups) {
    for (const char* collective : {"all_reduce", "reduce_scatter", "all_gather"}) {
      for (int64_t b = 8; b <= (int64_t{64} << 20); b *= 4) {
        Record r = row(stack(ranks), "collectives", "time", collective_seconds(static_cast<double>(b)));
        r.labels.op = collective;
        r.labels.dtype = "f32";
        r.labels.bytes = b;
        r.labels.placement = "out_of_place";
        r.labels.config = "redop=sum";
        rows.push_back(r);
      }
    }
  }
  for (int64_t b : {int64_t{8}, int64_t{1} << 22}) {
    Record r = row(stack(2), "topology", "p2p_latency", kLinkAlpha + static_cast<double>(b) / kLinkBeta);
    r.labels.bytes = b;
    r.labels.config = "link=same-node;direction=one-way";
    rows.push_back(r);
  }
  for (int64_t batch : {16, 64, 256}) {
    Record r = row(stack(1), "scaling", "step_time", compute_seconds(training_flops(spec, batch)));
    r.labels.strategy = "ddp";
    r.labels.config = "dp=1;tp=1;pp=1;zero=0;mb=1;schedule=none;mode=weak;job=4;layers=" + std::to_string(spec.layers) +
                      ";width=" + std::to_string(spec.width) + ";input=" + std::to_string(spec.input) +
                      ";classes=" + std::to_string(spec.classes) + ";batch=" + std::to_string(batch);
    rows.push_back(r);
  }
  return rows;
}

// The index of measured(groups, spec), as one file.
Measurements index_of(const std::vector<int>& groups, const ModelSpec& spec) {
  Measurements m;
  m.add(measured(groups, spec), "m.csv");
  return m;
}

// index_of({4}, spec) with every time of `suite`'s rows `factor` times longer.
Measurements slowed(const ModelSpec& spec, const std::string& suite, double factor) {
  std::vector<Record> rows = measured({4}, spec);
  for (Record& r : rows) {
    if (r.suite == suite) r.value *= factor;
  }
  Measurements m;
  m.add(rows, "m.csv");
  return m;
}

// Seconds per FLOP of the synthetic one-rank steps at the rows measured (16, 64, 256: the line's
// intercept spread over each step's FLOPs), between them linear in log(rows), outside them the
// nearest's: the compute rate README states.
double rate_at(const ModelSpec& spec, int64_t rows) {
  const auto at = [&](int64_t r) { return compute_seconds(training_flops(spec, r)) / training_flops(spec, r); };
  if (rows <= 16) return at(16);
  if (rows >= 256) return at(256);
  const int64_t lo = rows < 64 ? 16 : 64, hi = lo * 4;
  return at(lo) + (at(hi) - at(lo)) * std::log(static_cast<double>(rows) / static_cast<double>(lo)) / std::log(4.0);
}

ParallelConfig data_parallel(int n) {
  ParallelConfig c;
  c.dp = n;
  return c;
}

ModelSpec model() {
  ModelSpec spec;
  spec.layers = 4;
  spec.width = 256;
  spec.input = 64;
  spec.classes = 16;
  return spec;
}

double parameters(const ModelSpec& s) {
  // Weights and biases of input -> width -> ... -> classes.
  double p = 0;
  int in = s.input;
  for (int l = 0; l < s.layers; ++l) {
    const int out = l + 1 == s.layers ? s.classes : s.width;
    p += static_cast<double>(in) * out + out;
    in = out;
  }
  return p;
}

TEST(CostModel, TrainingFlopsAreThreeProductsPerLayerAndTwoForTheFirst) {
  const ModelSpec s = model();
  const double rows = 32;
  // Layers 64x256, 256x256, 256x256, 256x16: forward 2 R sum(in out); backward twice that but the
  // first layer's input gradient.
  const double forward = 2 * rows * (64.0 * 256 + 256.0 * 256 * 2 + 256.0 * 16);
  EXPECT_DOUBLE_EQ(forward_flops(s, 32), forward);
  EXPECT_DOUBLE_EQ(training_flops(s, 32), 3 * forward - 2 * rows * 64 * 256);
  // Split over tp ranks (every width divisible), the shards' FLOPs sum to the whole model's.
  for (int tp : {2, 4}) {
    double sum = 0;
    for (int t = 0; t < tp; ++t) sum += training_flops(s, 32, 0, s.layers, tp, t);
    EXPECT_DOUBLE_EQ(sum, training_flops(s, 32)) << "tp=" << tp;
  }
  // A stage's FLOPs: the stages of a split sum to the whole.
  EXPECT_DOUBLE_EQ(training_flops(s, 32, 0, 2) + training_flops(s, 32, 2, 4), training_flops(s, 32));
}

TEST(CostModel, GroupShapesFollowTheRankNumbering) {
  ParallelConfig c;
  c.dp = 2;
  c.tp = 2;
  // Ranks (dp, tp): 0 (0,0), 1 (0,1), 2 (1,0), 3 (1,1); two nodes of two ranks.
  EXPECT_EQ(group_shape(c, "tp", 2), (GroupShape{2, 1, 2}));  // ranks 0, 1: one node
  EXPECT_EQ(group_shape(c, "dp", 2), (GroupShape{2, 2, 1}));  // ranks 0, 2: a rank on each node
  EXPECT_EQ(group_shape(c, "world", 2), (GroupShape{4, 2, 2}));
  EXPECT_EQ(group_shape(c, "dp", 4), (GroupShape{2, 1, 2}));  // one node of four
  // tp = 3, dp = 2 on nodes of 4: the first tp group {0, 1, 2} is on one node, the second
  // {3, 4, 5} spans two; the step waits for the second.
  ParallelConfig three;
  three.dp = 2;
  three.tp = 3;
  EXPECT_EQ(group_shape(three, "tp", 4), (GroupShape{3, 2, 2}));
}

TEST(CostModel, DdpIsComputePlusWhatTheBucketsLeaveExposed) {
  const ModelSpec s = model();
  const LayoutPrediction p = predict("ddp", data_parallel(4), s, 64, ClusterShape{4, 4, 0}, index_of({4}, s));
  // 16 rows a rank; one bucket (the gradient is under 1 MiB), launched when backward ends: none
  // of it overlaps. Then the loss: 8 bytes, priced by the f32 line (f64 not measured).
  const double psi = parameters(s);
  const double compute = compute_seconds(training_flops(s, 16));
  const double exposed = collective_seconds(psi * 4) + collective_seconds(8);
  EXPECT_NEAR(p.compute, compute, compute * 1e-12);
  EXPECT_NEAR(p.exposed.at("dp"), collective_seconds(psi * 4), exposed * 1e-12);
  EXPECT_NEAR(p.exposed.at("world"), collective_seconds(8), exposed * 1e-12);
  EXPECT_NEAR(p.step_time, compute + exposed, (compute + exposed) * 1e-12);
  EXPECT_EQ(p.bubble, 0);
  // Memory, AdamW: weights, gradients and two moments, f32, plus one micro-batch's activations
  // (its input and every layer's output).
  const double activations = 16.0 * (64 + 256 * 3 + 16) * 4;
  EXPECT_DOUBLE_EQ(p.memory, 4 * psi * 4 + activations);
  EXPECT_TRUE(p.extrapolated.empty()) << p.extrapolated.front();
}

TEST(CostModel, DdpBucketsHideBehindTheLastBackwardUpToItsLength) {
  // 64 KiB buckets: several, all but the last (the first layer's) launched during backward, whose
  // window is 2/3 of the micro-batch's compute. Exact lines: hidden whole; collectives 1000 times
  // slower: what exceeds the window is exposed.
  const ModelSpec s = model();
  ParallelConfig c = data_parallel(4);
  c.bucket_bytes = 65536;
  const BucketPlan buckets = plan_buckets(parameter_layout(s), 4, c.bucket_bytes);
  ASSERT_GT(buckets.buckets.size(), 2u);
  const double compute = compute_seconds(training_flops(s, 16)), window = compute * 2 / 3;
  for (const double slower : {1.0, 1000.0}) {
    SCOPED_TRACE(slower);
    const Measurements m = slowed(s, "collectives", slower);
    double during = 0, last = 0;
    for (size_t b = 0; b < buckets.buckets.size(); ++b) {
      const double bytes = static_cast<double>(buckets.buckets[b].second - buckets.buckets[b].first) * 4;
      (b + 1 < buckets.buckets.size() ? during : last) += slower * collective_seconds(bytes);
    }
    const LayoutPrediction p = predict("ddp", c, s, 64, ClusterShape{4, 4, 0}, m);
    const double exposed = std::max(0.0, during - window) + last;
    EXPECT_NEAR(p.exposed.at("dp"), exposed, exposed * 1e-12);
    if (slower == 1) {
      EXPECT_LT(during, window);  // the case it is about: hidden whole
    } else {
      EXPECT_GT(during, window);
    }
  }
}

TEST(CostModel, AMicroBatchOfFewRowsRunsAtTheRateMeasuredAtItsRows) {
  // One rank, 64 rows: whole, the step measured at 64 rows; as 4 micro-batches (accumulation) of
  // 16 rows, 4 steps' worth at the rate of 16 rows, slower than the whole by 3 intercepts here
  // (every measured step's fixed cost is spread over its FLOPs). 8 rows lie below the rows measured:
  // the rate of 16, said.
  const ModelSpec s = model();
  const Measurements m = index_of({4}, s);
  ParallelConfig c = data_parallel(1);
  const double whole = predict("ddp", c, s, 64, ClusterShape{1, 1, 0}, m).compute;
  EXPECT_NEAR(whole, compute_seconds(training_flops(s, 64)), whole * 1e-12);
  c.microbatches = 4;
  const LayoutPrediction four = predict("ddp", c, s, 64, ClusterShape{1, 1, 0}, m);
  EXPECT_NEAR(four.compute, 4 * compute_seconds(training_flops(s, 16)), whole * 1e-12);
  EXPECT_NEAR(four.compute - whole, 3 * kComputeAlpha, whole * 1e-9);
  EXPECT_TRUE(four.extrapolated.empty());
  c.microbatches = 8;
  const LayoutPrediction eight = predict("ddp", c, s, 64, ClusterShape{1, 1, 0}, m);
  EXPECT_NEAR(eight.compute, 8 * training_flops(s, 8) * rate_at(s, 16), whole * 1e-12);
  ASSERT_EQ(eight.extrapolated.size(), 1u);
  EXPECT_EQ(eight.extrapolated[0], "compute at 8 rows a micro-batch (measured 16 to 256)");
}

TEST(CostModel, OneRankHasNoCommunication) {
  // A one-rank layout's calls are its loss's all_reduce over one rank: nothing moves, nothing is
  // priced, and no measurement of a one-rank group is asked for.
  const ModelSpec s = model();
  const LayoutPrediction p = predict("ddp", data_parallel(1), s, 64, ClusterShape{1, 1, 0}, index_of({4}, s));
  const double compute = compute_seconds(training_flops(s, 64));
  EXPECT_NEAR(p.step_time, compute, compute * 1e-12);
  EXPECT_TRUE(p.exposed.empty());
}

TEST(CostModel, ZeroShardsMemoryAndBlocksOnEveryCall) {
  const ModelSpec s = model();
  const Measurements m = index_of({4}, s);
  const ClusterShape cluster{4, 4, 0};
  const ParallelConfig c = data_parallel(4);
  const double psi = parameters(s), shard = std::ceil(psi / 4), activations = 16.0 * (64 + 256 * 3 + 16) * 4;
  const double buffer = 4 * shard * 4;  // N padded shards of f32
  for (int stage : {1, 2, 3}) {
    SCOPED_TRACE("zero" + std::to_string(stage));
    const LayoutPrediction p = predict("zero" + std::to_string(stage), c, s, 64, cluster, m);
    // Stages 1-2: a reduce_scatter and an all_gather; stage 3: two all_gathers a micro-batch and a
    // reduce_scatter, and the forward computed twice.
    const double calls = (stage == 3 ? 3 : 2) * collective_seconds(buffer) + collective_seconds(8);
    // At the rate measured at 16 rows.
    const double compute = (training_flops(s, 16) + (stage == 3 ? forward_flops(s, 16) : 0)) * rate_at(s, 16);
    EXPECT_NEAR(p.step_time, compute + calls, (compute + calls) * 1e-12);
    const double params = stage == 3 ? shard : psi, grads = stage == 1 ? psi : shard;
    EXPECT_DOUBLE_EQ(p.memory, (params + grads + 2 * shard) * 4 + activations);
  }
}

TEST(CostModel, APipelineWaitsItsBubble) {
  const ModelSpec s = model();
  const Measurements m = index_of({4}, s);
  const ClusterShape cluster{4, 4, 0};
  ParallelConfig c;
  c.pp = 4;
  c.microbatches = 4;
  c.schedule = PipelineSchedule::gpipe;
  const LayoutPrediction p = predict("gpipe", c, s, 64, cluster, m);
  // Four stages of one layer each. A stage's slot per micro-batch (16 rows): its compute (its
  // layer's FLOPs on 16 rows at the rate measured at 16 rows) and its sends (16 x 256 f32 each
  // way from a middle stage). T = sum of the slots + (m - 1) x the largest.
  double slowest = 0, sum = 0;
  const int64_t mb_rows = 16;
  for (int stage = 0; stage < 4; ++stage) {
    const double compute = 4 * training_flops(s, mb_rows, stage, stage + 1) * rate_at(s, mb_rows);
    double sends = 0;
    const int out = stage == 3 ? 0 : 256, in = stage == 0 ? 0 : 256;
    if (out) sends += 4 * (kLinkAlpha + mb_rows * out * 4.0 / kLinkBeta);
    if (in) sends += 4 * (kLinkAlpha + mb_rows * in * 4.0 / kLinkBeta);
    slowest = std::max(slowest, (compute + sends) / 4);
    sum += (compute + sends) / 4;
  }
  const double step = sum + 3 * slowest + collective_seconds(8);  // and the loss over the world
  EXPECT_NEAR(p.bubble, sum - slowest, slowest * 1e-12);
  EXPECT_NEAR(p.step_time, step, step * 1e-12);
  // 1F1B: stage k holds min(m, p - k) micro-batches' activations where GPipe holds m. The fullest
  // rank is stage 1 (65,792 parameters) either way: 3 micro-batches of 16 x (256 + 256) f32 where
  // GPipe holds 4. The time is the same (the model has no schedule term).
  c.schedule = PipelineSchedule::one_f_one_b;
  const LayoutPrediction q = predict("1f1b", c, s, 64, cluster, m);
  EXPECT_NEAR(q.step_time, p.step_time, step * 1e-12);
  EXPECT_DOUBLE_EQ(p.memory - q.memory, 16.0 * (256 + 256) * 4);
}

TEST(CostModel, CpuRanksComputingAtOnceShareTheNodesCores) {
  // The compute measured on a node of 2 cores; 4 ranks a node. Data parallel: all 4 compute at
  // once, each at half speed. A pipeline of 4 stages at m = 1: one stage computes at a time.
  const ModelSpec s = model();
  std::vector<Record> rows = measured({2, 4}, s);
  for (Record& r : rows) {
    if (r.suite == "scaling") r.labels.config += ";cores=2;node_ranks=4";
  }
  Measurements m;
  m.add(rows, "cores.csv");
  EXPECT_EQ(m.compute_cores(), 2);
  const double alone = compute_seconds(training_flops(s, 16));
  EXPECT_NEAR(predict("ddp", data_parallel(4), s, 64, ClusterShape{4, 4, 0}, m).compute, 2 * alone, alone * 1e-12);
  // Two ranks on the node: no more than its cores.
  const double half_batch = training_flops(s, 32) * rate_at(s, 32);
  EXPECT_NEAR(predict("ddp", data_parallel(2), s, 64, ClusterShape{2, 2, 0}, m).compute, half_batch, half_batch * 1e-12);
  ParallelConfig pipeline;
  pipeline.pp = 4;
  pipeline.schedule = PipelineSchedule::gpipe;
  const LayoutPrediction p = predict("gpipe", pipeline, s, 64, ClusterShape{4, 4, 0}, m);
  const double slowest_stage = training_flops(s, 64, 1, 2) * rate_at(s, 64);
  EXPECT_NEAR(p.compute, slowest_stage, slowest_stage * 1e-12);
}

TEST(CostModel, ALargerClusterIsExtendedFromMeasuredShapesByTheRingModelAndSaysSo) {
  // Measured: 2 and 4 ranks on one node, 4 ranks on 2 nodes (2 per node). Planned: 16 ranks on
  // 4 nodes of 4. ddp's all_reduce on {16, 4, 4} comes from {4, 2, 2} (the only shape across
  // nodes): latency x 15/3, bytes term x (2 x 15/16) / (2 x 3/4) = 1.25.
  const ModelSpec s = model();
  std::vector<Record> rows = measured({2, 4}, s);
  for (Record r : measured({4}, s)) {
    if (r.suite != "collectives") continue;
    r.labels.nodes = 2;
    r.labels.ranks_per_node = 2;
    r.value *= 3;  // across nodes: slower, so that the source shows
    rows.push_back(r);
  }
  Measurements m;
  m.add(rows, "m.csv");
  ClusterShape cluster{16, 4, 0};
  EXPECT_THROW(predict("ddp", data_parallel(16), s, 256, cluster, m), Error);  // refused unless asked
  cluster.extend = true;
  const LayoutPrediction p = predict("ddp", data_parallel(16), s, 256, cluster, m);
  const double bytes = parameters(s) * 4;
  const double alpha = 3 * kAlpha * 15 / 3, per_byte = 3 / kBeta * 1.25;
  EXPECT_NEAR(p.exposed.at("dp"), alpha + bytes * per_byte, (alpha + bytes * per_byte) * 1e-9);
  ASSERT_EQ(p.extended.size(), 1u);  // the loss's all_reduce takes the same extension
  EXPECT_NE(p.extended[0].find("all_reduce f32 on 16 ranks on 4 nodes (4 per node): extended from 4 ranks on 2 "
                               "nodes (2 per node) by the ring model (latency x 5"),
            std::string::npos)
      << p.extended[0];
  // Across nodes, only a measurement across nodes is a source: with none, refused still.
  Measurements single = index_of({2, 4}, s);
  EXPECT_THROW(predict("ddp", data_parallel(16), s, 256, cluster, single), Error);
  // On one node, the measured single-node shape nearest in ranks: 8 ranks from 4.
  const LayoutPrediction eight = predict("ddp", data_parallel(8), s, 256, ClusterShape{8, 8, 0, true}, single);
  const double alpha8 = kAlpha * 7 / 3, per_byte8 = 1 / kBeta * (2.0 * 7 / 8) / (2.0 * 3 / 4);
  EXPECT_NEAR(eight.exposed.at("dp"), alpha8 + bytes * per_byte8, (alpha8 + bytes * per_byte8) * 1e-9);
}

TEST(CostModel, AGroupTheFilesLackIsRefusedWithTheCommand) {
  const ModelSpec s = model();
  const Measurements m = index_of({4}, s);
  ParallelConfig c;
  c.dp = 2;
  c.tp = 2;
  try {
    predict("hybrid", c, s, 64, ClusterShape{4, 4, 0}, m);
    FAIL() << "a group of 2 ranks was never measured";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("on 2 ranks on 1 node: not measured"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("mpirun -np 2 dtsuite run collectives"), std::string::npos) << e.what();
  }
  // No compute rows: the compute is refused too, naming the scaling suite.
  Measurements no_compute;
  std::vector<Record> rows = measured({2, 4}, s);
  std::erase_if(rows, [](const Record& r) { return r.suite == "scaling"; });
  no_compute.add(rows, "c.csv");
  try {
    predict("ddp", data_parallel(4), s, 64, ClusterShape{4, 4, 0}, no_compute);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dtsuite run scaling --strategy all"), std::string::npos) << e.what();
  }
}

// The synthetic point-to-point line, same node.
double link_seconds(double bytes) { return kLinkAlpha + bytes / kLinkBeta; }

ParallelConfig servers(int s, int w) {
  ParallelConfig c;
  c.servers = s;
  c.dp = w;
  return c;
}

TEST(CostModel, ASyncParameterServerIsARoundThroughTheServersEnd) {
  // One server, three workers of 22 rows (64 / 3 rounded up), one node. A round: the workers'
  // compute (at the rate between those measured at 16 and 64 rows), three pushes (a header of
  // 4 + S words and the whole gradient) taken in turn by the server's end, its update (the
  // intercept: an optimizer step of every parameter), three replies (a version and the
  // parameters) in turn. ps-backup (b = 1) rounds with the two others: its update waits for two.
  const ModelSpec s = model();
  const Measurements m = index_of({4}, s);
  const double psi = parameters(s);
  const double compute = training_flops(s, 22) * rate_at(s, 22);
  const double push = link_seconds(5 * 8) + link_seconds(psi * 4), reply = link_seconds(8) + link_seconds(psi * 4);
  for (const char* mode : {"ps-sync", "ps-backup"}) {
    SCOPED_TRACE(mode);
    ParallelConfig c = servers(1, 3);
    c.backup = std::string(mode) == "ps-backup" ? 1 : 0;
    const double counted = 3 - c.backup;
    const double round = compute + counted * push + kComputeAlpha + counted * reply;
    const LayoutPrediction p = predict(mode, c, s, 64, ClusterShape{4, 4, 0}, m);
    EXPECT_NEAR(p.compute, compute, compute * 1e-12);
    EXPECT_NEAR(p.step_time, round, round * 1e-12);
    EXPECT_NEAR(p.exposed.at("ps"), round - compute, round * 1e-12);
  }
  // Three servers and one worker: the worker's end is the narrower one. It sends three headers and
  // three ranges (the whole gradient) and takes three replies; each server updates its range (a
  // third of the intercept, the largest range's share).
  const LayoutPrediction q = predict("ps-sync", servers(3, 1), s, 64, ClusterShape{4, 4, 0}, m);
  const double range = std::ceil(psi / 3);  // even_split: the first ranges take the remainder
  double pushes = 0, replies = 0;
  for (int j = 0; j < 3; ++j) {
    const double n = j < static_cast<int>(psi) % 3 ? range : std::floor(psi / 3);
    pushes += link_seconds(7 * 8) + link_seconds(n * 4);
    replies += link_seconds(8) + link_seconds(n * 4);
  }
  const double one = compute_seconds(training_flops(s, 64)) + pushes + kComputeAlpha * range / psi + replies;
  EXPECT_NEAR(q.step_time, one, one * 1e-12);
  // Memory: a server holds its range, a receive and a reply buffer per worker, the summing
  // scratch and AdamW's two moments; a worker the model, its gradient and its rows' activations.
  const ParallelConfig c = servers(1, 3);
  const double server = psi * (1 + 2 * 3 + 1 + 2) * 4, worker = 2 * psi * 4 + 22.0 * (64 + 256 * 3 + 16) * 4;
  EXPECT_DOUBLE_EQ(predict("ps-sync", c, s, 64, ClusterShape{4, 4, 0}, m).memory, std::max(server, worker));
}

TEST(CostModel, AnAsyncParameterServerRunsAtItsWorkersPaceUntilTheServerIsTheBottleneck) {
  // ps-async and ps-ssp: no round. With fast links a worker's cycle is its compute and one round
  // trip (its push, the server's update of its gradient, the reply); with links 1000 times slower
  // the server's three pushes, three updates and three replies per global batch outlast it.
  const ModelSpec s = model();
  const double psi = parameters(s);
  const double compute = training_flops(s, 22) * rate_at(s, 22);
  for (const double slower : {1.0, 1000.0}) {
    SCOPED_TRACE(slower);
    const Measurements m = slowed(s, "topology", slower);
    const double push = slower * (link_seconds(5 * 8) + link_seconds(psi * 4));
    const double reply = slower * (link_seconds(8) + link_seconds(psi * 4));
    const double worker_cycle = compute + push + kComputeAlpha + reply;
    const double server_cycle = 3 * (push + kComputeAlpha + reply);
    for (const char* mode : {"ps-async", "ps-ssp"}) {
      SCOPED_TRACE(mode);
      const LayoutPrediction p = predict(mode, servers(1, 3), s, 64, ClusterShape{4, 4, 0}, m);
      const double expected = std::max(worker_cycle, server_cycle);
      EXPECT_NEAR(p.step_time, expected, expected * 1e-12);
    }
    if (slower == 1) {
      EXPECT_GT(worker_cycle, server_cycle);  // the case it is about: the workers set the pace
    } else {
      EXPECT_GT(server_cycle, worker_cycle);
    }
  }
}

TEST(CostModel, GossipIsComputePlusAModelFromEachNeighbour) {
  // Each rank receives its neighbours' models (Psi f32 and an 8-byte digest each) one at a time:
  // two from three ranks on, one on two ranks, none alone. Memory: three models while it mixes
  // (one alone), its gradient, AdamW's two moments, its rows' activations.
  const ModelSpec s = model();
  const Measurements m = index_of({4}, s);
  const double psi = parameters(s);
  const double model_message = link_seconds(psi * 4) + link_seconds(8);
  for (const int n : {1, 2, 3, 4}) {
    SCOPED_TRACE(n);
    const int64_t rows = (64 + n - 1) / n;
    const LayoutPrediction p = predict("gossip", data_parallel(n), s, 64, ClusterShape{n, n, 0}, m);
    const double neighbours = n == 1 ? 0 : n == 2 ? 1 : 2;
    const double expected = training_flops(s, rows) * rate_at(s, rows) + neighbours * model_message;
    EXPECT_NEAR(p.step_time, expected, expected * 1e-12);
    EXPECT_EQ(p.exposed.count("ring"), n > 1 ? 1u : 0u);
    const double copies = n == 1 ? 1 : 3;
    EXPECT_DOUBLE_EQ(p.memory, (copies + 1 + 2) * psi * 4 + static_cast<double>(rows) * (64 + 256 * 3 + 16) * 4);
  }
}

// Between nodes: 50 us + bytes / 100 MB/s a message, each node's link taking its messages in turn.
constexpr double kFarAlpha = 50e-6, kFarBeta = 1e8;
double far_seconds(double bytes) { return kFarAlpha + bytes / kFarBeta; }

// index_of({2, 4}, spec) with collectives on 4 ranks of 2 nodes and other-node messages too.
Measurements two_nodes(const ModelSpec& spec) {
  std::vector<Record> rows = measured({2, 4}, spec);
  for (Record r : measured({4}, spec)) {  // the collectives again on 4 ranks of 2 nodes
    if (r.suite != "collectives") continue;
    r.labels.nodes = 2;
    r.labels.ranks_per_node = 2;
    rows.push_back(r);
  }
  for (int64_t b : {int64_t{8}, int64_t{1} << 22}) {
    Record r = row(stack(2, 2), "topology", "p2p_latency", far_seconds(static_cast<double>(b)));
    r.labels.bytes = b;
    r.labels.config = "link=other-node;direction=one-way";
    rows.push_back(r);
  }
  Measurements m;
  m.add(rows, "two.csv");
  return m;
}

TEST(CostModel, MessagesBetweenNodesShareTheNodesLink) {
  // Two nodes of two ranks. ps-sync with servers 0-1 on one node and workers 2-3 on the other:
  // all four pushes (a header and half the gradient each) leave the workers' node through its
  // link, in turn, and the four replies come back the same way: the link, not any one end, sets
  // the round. Gossip on four ranks: ranks 0-1 and 2-3 share nodes, and the ring's edges 1-2 and
  // 3-0 cross: two models (and digests) each way through each node's link.
  const ModelSpec s = model();
  const Measurements m = two_nodes(s);
  const double psi = parameters(s), half = std::ceil(psi / 2);
  const ClusterShape cluster{4, 2, 0};
  const LayoutPrediction p = predict("ps-sync", servers(2, 2), s, 64, cluster, m);
  double pushes = 0, replies = 0;
  for (int j = 0; j < 2; ++j) {
    const double n = j == 0 ? half : std::floor(psi / 2);
    pushes += 2 * (far_seconds(6 * 8) + far_seconds(n * 4));
    replies += 2 * (far_seconds(8) + far_seconds(n * 4));
  }
  const double round = training_flops(s, 32) * rate_at(s, 32) + pushes + kComputeAlpha * half / psi + replies;
  EXPECT_NEAR(p.step_time, round, round * 1e-12);
  const LayoutPrediction g = predict("gossip", data_parallel(4), s, 64, cluster, m);
  const double exchange = 2 * (far_seconds(psi * 4) + far_seconds(8));
  const double gossip = training_flops(s, 16) * rate_at(s, 16) + exchange;
  EXPECT_NEAR(g.step_time, gossip, gossip * 1e-12);
}

TEST(CostModel, APipelinesSendsAcrossNodesShareTheLink) {
  // hybrid dp2 x pp2 on two nodes of two: stage 0 (ranks 0-1, one per replica) on one node,
  // stage 1 (ranks 2-3) on the other. At each of m = 4 micro-batches (8 rows) both replicas send
  // their activations (8 x 256 f32) across at once: the link takes the two in turn, twice a
  // single rank's sends. The slot's pp is what the stage's sends put on the busiest link.
  const ModelSpec s = model();
  const Measurements m = two_nodes(s);
  ParallelConfig c;
  c.dp = 2;
  c.pp = 2;
  c.microbatches = 4;
  c.schedule = PipelineSchedule::one_f_one_b;
  const LayoutPrediction p = predict("hybrid", c, s, 64, ClusterShape{4, 2, 0}, m);
  const double sends = 2 * 4 * far_seconds(8.0 * 256 * 4);
  EXPECT_NEAR(p.exposed.at("pp"), sends, sends * 1e-12);
}

TEST(CostModel, AFreeRunningWorkerNearItsServerCountsAtItsOwnRate) {
  // ps-async, one server (rank 0) and three workers on two nodes of two: worker 1 shares the
  // server's node, workers 2 and 3 cross the link. Each cycles at its compute and own round trip
  // (nothing is loaded past what it can take here: the far workers put 2 x 6.1 ms a direction on
  // the link per cycle of about 33 ms); the step reported is the global batch over the rows
  // trained per second, so the near worker's faster cycle counts for its rate. ps-ssp keeps
  // every worker at the slowest's pace.
  const ModelSpec s = model();
  const Measurements m = two_nodes(s);
  const double psi = parameters(s);
  const double compute = training_flops(s, 22) * rate_at(s, 22);
  const double near = compute + link_seconds(5 * 8) + link_seconds(psi * 4) + kComputeAlpha + link_seconds(8) +
                      link_seconds(psi * 4);
  const double far = compute + far_seconds(5 * 8) + far_seconds(psi * 4) + kComputeAlpha + far_seconds(8) +
                     far_seconds(psi * 4);
  ASSERT_LT(2 * (far_seconds(5 * 8) + far_seconds(psi * 4)) / far, 1);  // the link is not the bottleneck
  const ClusterShape cluster{4, 2, 0};
  const LayoutPrediction p = predict("ps-async", servers(1, 3), s, 64, cluster, m);
  const double expected = 64 / (22 / near + 21 / far + 21 / far);  // even_split: 22, 21, 21 rows
  EXPECT_NEAR(p.step_time, expected, expected * 1e-12);
  const LayoutPrediction q = predict("ps-ssp", servers(1, 3), s, 64, cluster, m);
  EXPECT_NEAR(q.step_time, far, far * 1e-12);
  EXPECT_LT(p.step_time, q.step_time);
}

TEST(CostModel, ABackupServerRoundsWithoutItsFarthestWorker) {
  // ps-backup (b = 1), one server and three workers on two nodes of two: worker 1 beside the
  // server, 2 and 3 across the link. The round counts the near worker and one far one: the
  // link carries one push and one reply, not two (as ps-sync's round, which waits for all).
  const ModelSpec s = model();
  const Measurements m = two_nodes(s);
  const double psi = parameters(s);
  const double compute = training_flops(s, 22) * rate_at(s, 22);
  const double push = far_seconds(5 * 8) + far_seconds(psi * 4), reply = far_seconds(8) + far_seconds(psi * 4);
  ParallelConfig c = servers(1, 3);
  c.backup = 1;
  const ClusterShape cluster{4, 2, 0};
  const double backup = compute + push + kComputeAlpha + reply, sync = compute + 2 * push + kComputeAlpha + 2 * reply;
  EXPECT_NEAR(predict("ps-backup", c, s, 64, cluster, m).step_time, backup, backup * 1e-12);
  EXPECT_NEAR(predict("ps-sync", servers(1, 3), s, 64, cluster, m).step_time, sync, sync * 1e-12);
}

TEST(CostModel, TheMessagesPricedAreTheTrafficTheStrategiesExpect) {
  // ps_calls and gossip_calls, whose bytes each strategy's expected_traffic() sums, against the
  // closed forms: a worker Psi e + S (4 + S) 8, a server W (8 + n_j e), gossip (Psi e + 8) to one
  // neighbour on two ranks, two from three.
  const int64_t psi = 1001;
  for (const auto& [servers, workers] : {std::pair{1, 3}, std::pair{2, 2}, std::pair{3, 1}}) {
    for (int r = 0; r < servers + workers; ++r) {
      const double sent = bytes_sent(ps_calls(psi, servers, workers, r, DType::f32), "ps");
      const double expected = r >= servers ? psi * 4.0 + servers * (4.0 + servers) * 8
                                           : workers * (8 + 4.0 * static_cast<double>(even_split(psi, servers, r).second));
      EXPECT_EQ(sent, expected) << "S=" << servers << " W=" << workers << " rank " << r;
    }
  }
  for (const int n : {1, 2, 3, 4}) {
    const double expected = n == 1 ? 0 : (psi * 4.0 + 8) * (n > 2 ? 2 : 1);
    for (int r = 0; r < n; ++r) EXPECT_EQ(bytes_sent(gossip_calls(psi, n, r, DType::f32), "ring"), expected) << n;
  }
}

TEST(CostModel, EveryRegisteredStrategyIsPlanned) {
  // The default plan takes every strategy: each has layouts on 4 ranks of this model and a price.
  const ModelSpec s = model();
  const Plan plan = plan_layouts(s, 64, ClusterShape{4, 4, 0}, planned_strategies(), index_of({2, 4}, s));
  std::set<std::string> seen;
  for (const LayoutPrediction& p : plan.layouts) {
    seen.insert(p.strategy);
    EXPECT_GT(p.step_time, 0) << p.strategy;
  }
  const std::vector<std::string> registered = registered_strategies();
  EXPECT_EQ(seen, std::set<std::string>(registered.begin(), registered.end()));
  // ps-sync: a layout per server count (1 to 3), each once.
  EXPECT_EQ(std::count_if(plan.layouts.begin(), plan.layouts.end(),
                          [](const LayoutPrediction& p) { return p.strategy == "ps-sync"; }),
            3);
}

TEST(CostModel, PlanRanksEveryLayoutAndMarksThoseOverTheLimit) {
  const ModelSpec s = model();
  const Measurements m = index_of({2, 4}, s);
  // A limit between zero3's memory and ddp's.
  const ParallelConfig c = data_parallel(4);
  const ClusterShape open{4, 4, 0};
  const double ddp = predict("ddp", c, s, 64, open, m).memory, zero3 = predict("zero3", c, s, 64, open, m).memory;
  ASSERT_LT(zero3, ddp);
  const ClusterShape cluster{4, 4, (ddp + zero3) / 2};
  const auto plan = plan_layouts(s, 64, cluster, {"ddp", "zero3", "tp", "gpipe", "1f1b", "hybrid"}, m).layouts;
  ASSERT_FALSE(plan.empty());
  bool over = false;
  for (size_t i = 0; i < plan.size(); ++i) {
    if (plan[i].strategy == "ddp") {
      EXPECT_TRUE(plan[i].over_memory);
    }
    if (plan[i].strategy == "zero3") {
      EXPECT_FALSE(plan[i].over_memory);
    }
    // Within the limit first, each part by step time.
    EXPECT_TRUE(plan[i].over_memory || !over) << "a layout within the limit after one over it";
    over = over || plan[i].over_memory;
    if (i > 0 && plan[i].over_memory == plan[i - 1].over_memory) {
      EXPECT_LE(plan[i - 1].step_time, plan[i].step_time);
    }
  }
  // Pipelines at several m: gpipe is pp = 4 on 4 ranks, at m = 1, 2, 4, 8, 16 (64 rows allow all).
  EXPECT_EQ(std::count_if(plan.begin(), plan.end(), [](const LayoutPrediction& p) { return p.strategy == "gpipe"; }), 5);
  // A pipeline deeper than the model has no layout: said, not an error.
  ModelSpec three = s;
  three.layers = 3;
  const Plan shallow = plan_layouts(three, 64, ClusterShape{4, 4, 0}, {"ddp", "gpipe"}, index_of({2, 4}, three));
  ASSERT_EQ(shallow.without_layout.size(), 1u);
  EXPECT_NE(shallow.without_layout[0].find("gpipe: 3 layers cannot be split into 4"), std::string::npos)
      << shallow.without_layout[0];
  EXPECT_FALSE(shallow.layouts.empty());
}

TEST(CostModel, ParameterServersPastTheMessageBoundAreLeftOutAndSaid) {
  // Every S of N ranks is a layout of 4 S (N - S) messages: on 512 ranks, 4 x (512 x 130816 -
  // 44608256) = 89,478,144 in all, over the 2^22 priced one by one (the plan of 4,096 ranks took
  // 85 s and 65,536 ran out of memory); on 64 ranks 4 x (64 x 2016 - 85344) = 174,720, priced.
  // Pinned to one S, 4 x 2 x 510 = 4,080 messages: planned.
  const ModelSpec s = model();
  const Measurements m = index_of({4}, s);
  const Plan many = plan_layouts(s, 4096, ClusterShape{512, 512, 0}, {"ps-sync", "ps-sync(servers=2)"}, m);
  ASSERT_EQ(many.without_layout.size(), 1u);
  EXPECT_NE(many.without_layout[0].find("ps-sync: 511 layouts on 512 ranks send 8.95e+07 messages a step"),
            std::string::npos)
      << many.without_layout[0];
  ASSERT_EQ(many.layouts.size(), 1u);
  EXPECT_EQ(many.layouts[0].layout.servers, 2);
  const Plan few = plan_layouts(s, 4096, ClusterShape{64, 64, 0}, {"ps-sync"}, m);
  EXPECT_TRUE(few.without_layout.empty());
  EXPECT_EQ(few.layouts.size(), 63u);  // S = 1 to 63
}

}  // namespace
}  // namespace dts::planner

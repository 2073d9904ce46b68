// ParallelMlp in one process: at tp = 1 a chain of pipeline stages computes exactly what Mlp does
// (bit for bit, f64 / f32 / bf16), tensor-parallel shards tile the reference layout, and the stage
// balancing and reordered-term counts the equivalence bound uses. tp > 1 numerics: hybrid_mpi_test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "strategies/tensor/parallel_mlp.h"

namespace dts {
namespace {

const ModelSpec kDefaultSpec{};  // layers 3, width 64, input 32, classes 10
// Odd widths everywhere, so no layer's shape hides a transposed or mis-strided index.
ModelSpec odd_spec(int layers) { return {layers, 9, 7, 5, 21, 22}; }

// 13 rows: odd, and not a multiple of any tile or tp size. 13/64: the share of a 64-row global
// batch these rows are, as a data-parallel shard scales its gradients; not a power of two, so the
// scaling really rounds.
constexpr int64_t kRows = 13;
constexpr double kLossScale = 13.0 / 64.0;

// A Communicator that holds a tp group's size and nothing else: enough for the constructor's
// check. (tp > 1 numerics need real peers: the MPI tests.)
class SizedCommunicator final : public Communicator {
 public:
  explicit SizedCommunicator(int size) : size_(size) {}
  std::string_view backend() const override { return "sized"; }
  std::string version() const override { return "sized"; }
  int rank() const override { return 0; }
  int size() const override { return size_; }
  Memory memory() const override { return Memory::host; }
  void barrier() override {}
  std::unique_ptr<Communicator> split(int, int) override { return std::make_unique<SizedCommunicator>(size_); }

 private:
  int size_;
};

template <class T>
std::vector<T> cast(const std::vector<double>& values) {
  return std::vector<T>(values.begin(), values.end());
}

// `values` as a host array, what ParallelMlp takes and returns.
template <class T>
kernels::Array<T> host_array(const std::vector<T>& values) {
  kernels::Array<T> array(Memory::host, static_cast<int64_t>(values.size()));
  array.upload(values.data(), array.size());
  return array;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Runs one micro-batch through stages [bounds[s], bounds[s + 1]) at tp = 1, chaining activations
// forward and input gradients backward, and expects Mlp's loss and gradients bit for bit: the
// reference layout is the stages' layouts concatenated.
template <class T>
void expect_stages_equal_mlp(const ModelSpec& spec, const std::vector<int>& bounds, MlpCompute compute) {
  SCOPED_TRACE("layers " + std::to_string(spec.layers) + ", " + std::to_string(bounds.size() - 1) + " stages, " +
               (compute == MlpCompute::bf16 ? "bf16" : sizeof(T) == 8 ? "f64" : "f32"));
  const Batch batch = make_batch(spec, 0, kRows);
  const std::vector<T> reference_params = cast<T>(init_parameters(spec));
  std::vector<T> reference_grads(reference_params.size());
  Mlp<T> mlp(spec, compute);
  const double reference_loss =
      mlp.forward_backward(reference_params.data(), reference_grads.data(), batch, kLossScale);

  std::vector<ParallelMlp<T>> stages;
  std::vector<std::vector<T>> params, grads;
  for (size_t s = 0; s + 1 < bounds.size(); ++s) {
    stages.emplace_back(spec, bounds[s], bounds[s + 1], 1, 0, nullptr, compute);
    params.push_back(stages.back().initial_parameters());
    grads.emplace_back(params.back().size());
  }
  std::vector<T> all_params;
  for (const auto& p : params) all_params.insert(all_params.end(), p.begin(), p.end());
  // Philox per element: each stage generating its own slice gives the whole model's values.
  ASSERT_TRUE(same_bits(all_params, reference_params));

  std::vector<SavedActivations<T>> saved(stages.size());
  StepReport report;
  double loss = std::numeric_limits<double>::quiet_NaN();
  kernels::Array<T> activation = host_array(cast<T>(batch.x));
  for (size_t s = 0; s < stages.size(); ++s) {
    activation = stages[s].forward(params[s].data(), std::move(activation), kRows, batch.labels.data(), saved[s],
                                   loss, report);
    if (!stages[s].last_stage()) {
      ASSERT_EQ(activation.size(), kRows * stages[s].output_width());
    }
  }
  EXPECT_TRUE(activation.empty());  // the last stage returns the loss, not an activation
  kernels::Array<T> gradient;
  for (size_t s = stages.size(); s-- > 0;) {
    gradient = stages[s].backward(params[s].data(), grads[s].data(), saved[s], std::move(gradient), kLossScale, report);
    if (!stages[s].first_stage()) {
      ASSERT_EQ(gradient.size(), kRows * stages[s].input_width());
    }
  }
  EXPECT_TRUE(gradient.empty());  // nothing before the first stage needs its input gradient

  std::vector<T> all_grads;
  for (const auto& g : grads) all_grads.insert(all_grads.end(), g.begin(), g.end());
  EXPECT_EQ(loss, reference_loss);
  EXPECT_TRUE(same_bits(all_grads, reference_grads));
  // tp = 1 crosses no tp group.
  EXPECT_EQ(report.collectives, 0);
  EXPECT_EQ(report.bytes_sent, 0);
}

void expect_stages_equal_mlp_in_every_precision(const ModelSpec& spec, const std::vector<int>& bounds) {
  expect_stages_equal_mlp<double>(spec, bounds, MlpCompute::native);
  expect_stages_equal_mlp<float>(spec, bounds, MlpCompute::native);
  expect_stages_equal_mlp<float>(spec, bounds, MlpCompute::bf16);
}

TEST(ParallelMlp, WholeModelAtTp1IsMlp) {
  expect_stages_equal_mlp_in_every_precision(kDefaultSpec, {0, kDefaultSpec.layers});
  // One layer: first and last stage at once (no GeLU, no input gradient).
  expect_stages_equal_mlp_in_every_precision(odd_spec(1), {0, 1});
}

TEST(ParallelMlp, EveryPipelineSplitAtTp1IsMlp) {
  // Every way to cut 3 and 4 layers into contiguous stages (each subset of the L - 1 interior
  // cut points): 2 splits of 3 layers into two stages, the three-stage splits of 4 layers, ...
  for (int layers : {3, 4}) {
    for (int cuts = 0; cuts < 1 << (layers - 1); ++cuts) {
      std::vector<int> bounds{0};
      for (int b = 1; b < layers; ++b) {
        if (cuts & 1 << (b - 1)) bounds.push_back(b);
      }
      bounds.push_back(layers);
      expect_stages_equal_mlp_in_every_precision(odd_spec(layers), bounds);
    }
  }
}

TEST(ParallelMlp, RefusesMismatchedInputAndGradient) {
  const ModelSpec spec = odd_spec(3);
  ParallelMlp<double> first(spec, 0, 1, 1, 0, nullptr), last(spec, 1, 3, 1, 0, nullptr);
  const Batch batch = make_batch(spec, 0, kRows);
  std::vector<double> params = first.initial_parameters(), grads(params.size());
  SavedActivations<double> saved;
  StepReport report;
  double loss = 0;
  std::vector<double> short_input(batch.x.begin(), batch.x.end() - 1);  // one feature short
  EXPECT_THROW(first.forward(params.data(), host_array(short_input), kRows, batch.labels.data(), saved, loss, report),
               Error);
  first.forward(params.data(), host_array(batch.x), kRows, batch.labels.data(), saved, loss, report);
  // A non-last stage needs its output's gradient: rows x output_width, not empty.
  EXPECT_THROW(first.backward(params.data(), grads.data(), saved, kernels::Array<double>(), 1.0, report), Error);
  EXPECT_EQ(last.input_width(), spec.width);
}

TEST(ParallelMlp, ConstructorNeedsATpGroupOfTpRanks) {
  const ModelSpec spec = odd_spec(3);
  SizedCommunicator one(1), two(2), three(3);
  EXPECT_NO_THROW(ParallelMlp<double>(spec, 0, 3, 1, 0, nullptr));  // tp = 1 needs no group
  EXPECT_NO_THROW(ParallelMlp<double>(spec, 0, 3, 2, 1, &two));
  for (Communicator* wrong : {static_cast<Communicator*>(nullptr), static_cast<Communicator*>(&one),
                              static_cast<Communicator*>(&three)}) {
    try {
      ParallelMlp<double>(spec, 0, 3, 2, 0, wrong);
      ADD_FAILURE() << "a tp group of " << (wrong ? wrong->size() : 0) << " ranks accepted for tp=2";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    }
  }
  // bf16 keeps f32 masters, as Mlp does.
  EXPECT_THROW(ParallelMlp<double>(spec, 0, 3, 1, 0, nullptr, MlpCompute::bf16), Error);
}

TEST(LayerSplits, PairColumnThenRowAndReplicateAnOddLast) {
  using enum LayerSplit;
  EXPECT_EQ(layer_splits(3, 1), (std::vector<LayerSplit>{replicated, replicated, replicated}));
  EXPECT_EQ(layer_splits(3, 2), (std::vector<LayerSplit>{column, row, replicated}));
  EXPECT_EQ(layer_splits(4, 3), (std::vector<LayerSplit>{column, row, column, row}));
  EXPECT_EQ(layer_splits(1, 2), (std::vector<LayerSplit>{replicated}));
}

// Every (pipeline stage, tp rank) layout of `spec`: runs tile each rank's buffer from 0 without
// gaps, the replicated block first; layers' tensors are stored where LocalLayer says (weight
// out_local x in_local, bias) and tile the buffer too; and over all ranks every reference element
// is held once, or by each of the tp ranks when replicated.
void expect_shards_tile_the_model(const ModelSpec& spec, int tp) {
  const int64_t total = parameter_count(spec);
  const std::vector<double> reference = init_parameters(spec);
  for (int pp = 1; pp <= spec.layers; ++pp) {
    SCOPED_TRACE("layers " + std::to_string(spec.layers) + " width " + std::to_string(spec.width) + " tp " +
                 std::to_string(tp) + " pp " + std::to_string(pp));
    const std::vector<int> bounds = balanced_stages(spec, pp);
    std::vector<int> holders(static_cast<size_t>(total), 0);
    std::vector<int> replicated(static_cast<size_t>(total), -1);  // -1: not seen yet
    for (int s = 0; s < pp; ++s) {
      SizedCommunicator group(tp);
      for (int rank = 0; rank < tp; ++rank) {
        const ParallelMlp<double> shard(spec, bounds[s], bounds[s + 1], tp, rank, &group);
        const StageLayout& layout = shard.layout();
        std::vector<ParameterRun> by_offset = layout.runs;
        std::sort(by_offset.begin(), by_offset.end(),
                  [](const ParameterRun& a, const ParameterRun& b) { return a.local < b.local; });
        int64_t local = 0;
        for (const ParameterRun& run : by_offset) {
          EXPECT_EQ(run.local, local);
          EXPECT_GT(run.length, 0);
          // The replicated block is [0, replicated): the same on every tp rank.
          EXPECT_EQ(run.replicated, run.local < layout.replicated) << run.local;
          local = run.local + run.length;
          for (int64_t i = run.reference; i < run.reference + run.length; ++i) {
            ASSERT_TRUE(i >= 0 && i < total) << i;
            ++holders[static_cast<size_t>(i)];
            // An element is replicated on every rank that holds it, or on none.
            if (replicated[static_cast<size_t>(i)] >= 0) {
              EXPECT_EQ(replicated[static_cast<size_t>(i)], run.replicated);
            }
            replicated[static_cast<size_t>(i)] = run.replicated;
          }
        }
        EXPECT_EQ(local, layout.count);
        std::vector<std::pair<int64_t, int64_t>> tensors;  // [begin, end) of every weight and bias
        for (const LocalLayer& layer : layout.layers) {
          tensors.emplace_back(layer.weight, layer.weight + layer.out_local * layer.in_local);
          tensors.emplace_back(layer.bias, layer.bias + layer.out_local);
          // Each feature split is even_split's: sizes differ by at most one.
          if (layer.split == LayerSplit::column) {
            EXPECT_EQ(layer.out_local, even_split(layer.out, tp, rank).second);
          } else if (layer.split == LayerSplit::row) {
            EXPECT_EQ(layer.in_local, even_split(layer.in, tp, rank).second);
          }
        }
        std::sort(tensors.begin(), tensors.end());
        int64_t offset = 0;
        for (const auto& [begin, end] : tensors) {
          EXPECT_EQ(begin, offset);
          offset = end;
        }
        EXPECT_EQ(offset, layout.count);
        // The shard's initial values are the reference's at the runs' positions.
        const std::vector<double> params = shard.initial_parameters();
        for (const ParameterRun& run : layout.runs) {
          EXPECT_TRUE(std::equal(params.begin() + run.local, params.begin() + run.local + run.length,
                                 reference.begin() + run.reference));
        }
      }
    }
    for (int64_t i = 0; i < total; ++i) {
      ASSERT_EQ(holders[static_cast<size_t>(i)], replicated[static_cast<size_t>(i)] == 1 ? tp : 1) << "element " << i;
    }
  }
}

TEST(StageLayout, TensorParallelShardsTileTheReferenceLayout) {
  for (int tp : {1, 2, 3, 4}) {
    expect_shards_tile_the_model(kDefaultSpec, tp);  // width 64: uneven at tp = 3
    expect_shards_tile_the_model({4, 64, 30, 10, 3, 4}, tp);  // two column/row pairs
    // Width 7: uneven at every tp > 1; input 3 and classes 2 are never split, so may be < tp.
    expect_shards_tile_the_model({5, 7, 3, 2, 5, 6}, tp);
  }
}

TEST(StageLayout, WithoutRunsItsSizesAreTheSame) {
  // The planner's layout of a model on paper lists no runs (a row-parallel layer has one per
  // output row); its sizes must be the ones the strategies hold.
  for (const ModelSpec& spec : {kDefaultSpec, ModelSpec{4, 64, 30, 10, 3, 4}, ModelSpec{5, 7, 3, 2, 5, 6}}) {
    for (int tp : {1, 2, 3, 4}) {
      for (int t = 0; t < tp; ++t) {
        const StageLayout full = stage_layout(spec, 1, spec.layers, tp, t);
        const StageLayout sizes = stage_layout(spec, 1, spec.layers, tp, t, /*with_runs=*/false);
        EXPECT_TRUE(sizes.runs.empty());
        EXPECT_EQ(sizes.count, full.count) << "tp " << tp << " rank " << t;
        EXPECT_EQ(sizes.replicated, full.replicated) << "tp " << tp << " rank " << t;
        ASSERT_EQ(sizes.layers.size(), full.layers.size());
        for (size_t l = 0; l < full.layers.size(); ++l) {
          EXPECT_EQ(sizes.layers[l].in_local, full.layers[l].in_local);
          EXPECT_EQ(sizes.layers[l].out_local, full.layers[l].out_local);
        }
      }
    }
  }
}

TEST(StageLayout, WidthSmallerThanTpIsRefused) {
  const ModelSpec narrow{3, 2, 32, 10, 1, 2};  // 2 hidden features for 3 ranks
  try {
    stage_layout(narrow, 0, 3, 3, 0);
    ADD_FAILURE() << "width 2 split 3 ways";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("tp=3"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(stage_layout(narrow, 0, 3, 2, 1));  // width == tp: one feature each
  // A stage holding only the replicated odd last layer splits nothing, so any tp fits.
  EXPECT_NO_THROW(stage_layout(narrow, 2, 3, 3, 0));
  EXPECT_THROW(stage_layout(narrow, 1, 1, 1, 0), Error);  // an empty stage
  EXPECT_THROW(stage_layout(narrow, 0, 4, 1, 0), Error);  // past the last layer
}

// The largest stage of `bounds` in parameters.
int64_t largest_stage(const ModelSpec& spec, const std::vector<int>& bounds) {
  const std::vector<ParameterInfo> layout = parameter_layout(spec);
  int64_t largest = 0;
  for (size_t s = 0; s + 1 < bounds.size(); ++s) {
    int64_t size = 0;
    for (int l = bounds[s]; l < bounds[s + 1]; ++l) size += layout[2 * size_t(l)].size() + layout[2 * size_t(l) + 1].size();
    largest = std::max(largest, size);
  }
  return largest;
}

TEST(BalancedStages, DefaultModel) {
  // Layer sizes 32*64+64 = 2112, 64*64+64 = 4160, 64*10+10 = 650: two stages split {0} | {1, 2}
  // (largest 4160 + 650 = 4810), not {0, 1} | {2} (largest 2112 + 4160 = 6272).
  EXPECT_EQ(balanced_stages(kDefaultSpec, 1), (std::vector<int>{0, 3}));
  EXPECT_EQ(balanced_stages(kDefaultSpec, 2), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(largest_stage(kDefaultSpec, {0, 1, 3}), 4810);
  EXPECT_EQ(balanced_stages(kDefaultSpec, 3), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_THROW(balanced_stages(kDefaultSpec, 4), Error);  // a stage needs a layer
  EXPECT_THROW(balanced_stages(kDefaultSpec, 0), Error);
}

// Every split of `layers` layers into `stages` stages, each as its bounds, in lexicographic order.
void all_splits(int layers, int stages, std::vector<int>& bounds, std::vector<std::vector<int>>& out) {
  if (static_cast<int>(bounds.size()) == stages) {
    out.push_back(bounds);
    out.back().push_back(layers);
    return;
  }
  const int stages_left = stages - static_cast<int>(bounds.size());
  for (int b = bounds.back() + 1; b <= layers - stages_left; ++b) {
    bounds.push_back(b);
    all_splits(layers, stages, bounds, out);
    bounds.pop_back();
  }
}

TEST(BalancedStages, MinimiseTheLargestStageAsBruteForceDoes) {
  // Wide and narrow inputs and heads move the balance point; equal hidden layers make ties.
  for (const ModelSpec& spec : {ModelSpec{5, 16, 100, 3}, ModelSpec{5, 40, 7, 200}, ModelSpec{6, 24, 24, 24},
                                ModelSpec{6, 9, 300, 2}, ModelSpec{6, 30, 5, 90}}) {
    for (int stages = 1; stages <= spec.layers; ++stages) {
      std::vector<int> start{0};
      std::vector<std::vector<int>> splits;
      all_splits(spec.layers, stages, start, splits);
      int64_t best = std::numeric_limits<int64_t>::max();
      for (const auto& split : splits) best = std::min(best, largest_stage(spec, split));
      const std::vector<int> bounds = balanced_stages(spec, stages);
      ASSERT_EQ(bounds.size(), size_t(stages) + 1);
      EXPECT_TRUE(std::is_sorted(bounds.begin(), bounds.end()) &&
                  std::adjacent_find(bounds.begin(), bounds.end()) == bounds.end());
      EXPECT_EQ(bounds.front(), 0);
      EXPECT_EQ(bounds.back(), spec.layers);
      EXPECT_EQ(largest_stage(spec, bounds), best)
          << "layers " << spec.layers << " width " << spec.width << " stages " << stages;
    }
  }
}

TEST(TensorParallelReorderedTerms, CountsRowOutputsAndColumnInputGradients) {
  EXPECT_EQ(tensor_parallel_reordered_terms(kDefaultSpec, 1), 0);  // nothing split
  // Layer 0 is column-parallel but the model's first: no input gradient to sum. Layer 1 is
  // row-parallel over 64 inputs: 63 more additions in each output. Layer 2 is replicated.
  EXPECT_EQ(tensor_parallel_reordered_terms(kDefaultSpec, 2), 63);
  // The count follows the split pattern, not how many ranks share it.
  EXPECT_EQ(tensor_parallel_reordered_terms(kDefaultSpec, 3), 63);
  // 4 layers: layer 1 row (64 - 1) + layer 2 column past the first (its 64 outputs - 1) +
  // layer 3 row (64 - 1).
  EXPECT_EQ(tensor_parallel_reordered_terms(ModelSpec{4, 64, 32, 10}, 2), 3 * 63);
  EXPECT_EQ(tensor_parallel_reordered_terms(ModelSpec{1, 64, 32, 10}, 2), 0);  // one replicated layer
}

}  // namespace
}  // namespace dts

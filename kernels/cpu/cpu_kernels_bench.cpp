// Throughput of kernels/cpu: gemm in GFLOP/s (2mnk per call), the elementwise and row-wise
// kernels in GB/s (bytes each call must read and write). Correctness lives in cpu_kernels_test.
//   build-dir/kernels/cpu_kernels_bench [--benchmark_min_time=0.05] [--benchmark_filter=gemm]
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "core/half.h"
#include "kernels/cpu/cpu_kernels.h"

namespace dts::kernels::cpu {
namespace {

template <class T>
std::vector<T> random_vector(int64_t count, double lo, double hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> out(static_cast<size_t>(count));
  for (auto& x : out) x = static_cast<T>(dist(rng));
  return out;
}

// Bytes moved -> GB/s (SI, 1e9) in the report.
void set_bytes(benchmark::State& state, double bytes_per_call) {
  state.SetBytesProcessed(static_cast<int64_t>(bytes_per_call * static_cast<double>(state.iterations())));
}

template <class T>
void bm_gemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  GemmShape shape;
  shape.m = shape.n = shape.k = n;
  shape.lda = shape.ldb = shape.ldc = n;
  const auto a = random_vector<T>(n * n, -1, 1, 1), b = random_vector<T>(n * n, -1, 1, 2);
  std::vector<T> c(static_cast<size_t>(n * n), T(0));
  for (auto _ : state) {
    gemm<T>(shape, T(1), a.data(), b.data(), T(0), c.data());
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// Elementwise shapes: rows x 1024 columns (a transformer's hidden width), n = rows * 1024.
constexpr int64_t kCols = 1024;

void bm_bias_gelu_forward(benchmark::State& state) {
  const int64_t n = state.range(0), rows = n / kCols;
  const auto x = random_vector<float>(n, -3, 3, 1), bias = random_vector<float>(kCols, -1, 1, 2);
  std::vector<float> pre(static_cast<size_t>(n)), y(static_cast<size_t>(n));
  for (auto _ : state) {
    bias_gelu_forward<float>(x.data(), bias.data(), pre.data(), y.data(), rows, kCols);
    benchmark::ClobberMemory();
  }
  set_bytes(state, static_cast<double>(sizeof(float)) * (3.0 * static_cast<double>(n) + kCols));  // x, bias; pre, y
}

void bm_bias_gelu_backward(benchmark::State& state) {
  const int64_t n = state.range(0), rows = n / kCols;
  const auto pre = random_vector<float>(n, -3, 3, 1), dy = random_vector<float>(n, -1, 1, 2);
  std::vector<float> dx(static_cast<size_t>(n)), dbias(kCols);
  for (auto _ : state) {
    bias_gelu_backward<float>(pre.data(), dy.data(), dx.data(), dbias.data(), rows, kCols);
    benchmark::ClobberMemory();
  }
  set_bytes(state, static_cast<double>(sizeof(float)) * (3.0 * static_cast<double>(n) + kCols));  // pre, dy; dx, dbias
}

void bm_softmax_cross_entropy(benchmark::State& state) {
  const int64_t n = state.range(0), classes = kCols, rows = n / classes;
  const auto logits = random_vector<float>(n, -8, 8, 1);
  std::vector<int32_t> labels(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) labels[static_cast<size_t>(r)] = static_cast<int32_t>((r * 37) % classes);
  std::vector<float> dlogits(static_cast<size_t>(n));
  for (auto _ : state) {
    benchmark::DoNotOptimize(softmax_cross_entropy<float>(logits.data(), labels.data(), dlogits.data(), rows, classes));
    benchmark::ClobberMemory();
  }
  // logits and labels read, dlogits written.
  set_bytes(state, 2.0 * sizeof(float) * static_cast<double>(n) + sizeof(int32_t) * static_cast<double>(rows));
}

void bm_sgd_momentum(benchmark::State& state) {
  const int64_t n = state.range(0);
  auto param = random_vector<float>(n, -1, 1, 1), velocity = random_vector<float>(n, -0.1, 0.1, 3);
  const auto grad = random_vector<float>(n, -1, 1, 2);
  const SgdMomentum opt{.lr = 1e-3, .momentum = 0.9, .weight_decay = 1e-4};
  for (auto _ : state) {
    sgd_momentum_step<float>(param.data(), grad.data(), velocity.data(), n, opt);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 5.0 * sizeof(float) * static_cast<double>(n));  // read p, g, v; write p, v
}

void bm_adamw(benchmark::State& state) {
  const int64_t n = state.range(0);
  auto param = random_vector<float>(n, -1, 1, 1), m = random_vector<float>(n, -0.1, 0.1, 3);
  auto v = random_vector<float>(n, 0, 0.01, 4);
  const auto grad = random_vector<float>(n, -1, 1, 2);
  const AdamW opt;
  int64_t step = 10;  // past the first steps; the cost does not depend on it
  for (auto _ : state) {
    adamw_step<float>(param.data(), grad.data(), m.data(), v.data(), n, opt, step);
    benchmark::ClobberMemory();
  }
  set_bytes(state, 7.0 * sizeof(float) * static_cast<double>(n));  // read p, g, m, v; write p, m, v
}

template <bool kBf16>
void bm_cast_to_narrow(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto in = random_vector<float>(n, -100, 100, 1);
  std::vector<uint16_t> out(static_cast<size_t>(n));
  for (auto _ : state) {
    if constexpr (kBf16) {
      cast_f32_to_bf16(in.data(), out.data(), n);
    } else {
      cast_f32_to_f16(in.data(), out.data(), n);
    }
    benchmark::ClobberMemory();
  }
  set_bytes(state, (sizeof(float) + sizeof(uint16_t)) * static_cast<double>(n));
}

template <bool kBf16>
void bm_cast_to_f32(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto values = random_vector<float>(n, -100, 100, 1);
  std::vector<uint16_t> in(static_cast<size_t>(n));
  for (size_t i = 0; i < in.size(); ++i) {
    in[i] = kBf16 ? bf16_bits_from_double(values[i]) : f16_bits_from_double(values[i]);
  }
  std::vector<float> out(static_cast<size_t>(n));
  for (auto _ : state) {
    if constexpr (kBf16) {
      cast_bf16_to_f32(in.data(), out.data(), n);
    } else {
      cast_f16_to_f32(in.data(), out.data(), n);
    }
    benchmark::ClobberMemory();
  }
  set_bytes(state, (sizeof(float) + sizeof(uint16_t)) * static_cast<double>(n));
}

// Square gemm at 256 (fits L2), 512, 1024 (streams from L3/DRAM); elementwise at 1M, 4M and 16M
// elements (the largest well past any cache, so GB/s is memory bandwidth when the kernel keeps up).
BENCHMARK(bm_gemm<float>)->Name("gemm/f32")->Arg(256)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(bm_gemm<double>)->Name("gemm/f64")->Arg(256)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);
#define DTS_ELEMENTWISE_SIZES RangeMultiplier(4)->Range(1 << 20, 1 << 24)->Unit(benchmark::kMillisecond)
BENCHMARK(bm_bias_gelu_forward)->Name("bias_gelu_forward/f32")->DTS_ELEMENTWISE_SIZES;
BENCHMARK(bm_bias_gelu_backward)->Name("bias_gelu_backward/f32")->DTS_ELEMENTWISE_SIZES;
BENCHMARK(bm_softmax_cross_entropy)->Name("softmax_cross_entropy/f32")->DTS_ELEMENTWISE_SIZES;
BENCHMARK(bm_sgd_momentum)->Name("sgd_momentum/f32")->DTS_ELEMENTWISE_SIZES;
BENCHMARK(bm_adamw)->Name("adamw/f32")->DTS_ELEMENTWISE_SIZES;
BENCHMARK(bm_cast_to_narrow<true>)->Name("cast/f32_to_bf16")->DTS_ELEMENTWISE_SIZES;
BENCHMARK(bm_cast_to_f32<true>)->Name("cast/bf16_to_f32")->DTS_ELEMENTWISE_SIZES;
BENCHMARK(bm_cast_to_narrow<false>)->Name("cast/f32_to_f16")->DTS_ELEMENTWISE_SIZES;
BENCHMARK(bm_cast_to_f32<false>)->Name("cast/f16_to_f32")->DTS_ELEMENTWISE_SIZES;
#undef DTS_ELEMENTWISE_SIZES

}  // namespace
}  // namespace dts::kernels::cpu

BENCHMARK_MAIN();

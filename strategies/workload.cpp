// Workload generation: layout, Philox-keyed parameters and teacher-student samples.
#include "strategies/workload.h"

#include <cmath>
#include <cstring>
#include <numbers>

#include "core/error.h"
#include "core/philox.h"

namespace dts {

uint64_t fnv1a(const void* data, size_t size, uint64_t seed) {
  uint64_t h = seed;
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    h ^= bytes[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t name_hash(const std::string& name) { return fnv1a(name.data(), name.size()); }

uint64_t word_digest(const void* data, size_t size, uint64_t seed) {
  constexpr uint64_t kPrime = 0x100000001b3ull;
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint64_t lane[4] = {seed, seed ^ 0x9e3779b97f4a7c15ull, seed ^ 0xbf58476d1ce4e5b9ull, seed ^ 0x94d049bb133111ebull};
  size_t i = 0;
  for (; i + 32 <= size; i += 32) {
    for (size_t l = 0; l < 4; ++l) {
      uint64_t word = 0;
      std::memcpy(&word, bytes + i + 8 * l, sizeof word);
      lane[l] = (lane[l] ^ word) * kPrime;
    }
  }
  // The tail, byte by byte into lane 0; then the lanes and the length folded into one.
  for (; i < size; ++i) lane[0] = (lane[0] ^ bytes[i]) * kPrime;
  uint64_t h = lane[0];
  for (size_t l = 1; l < 4; ++l) h = (h ^ lane[l]) * kPrime;
  return (h ^ size) * kPrime;
}

std::vector<int64_t> layer_dims(const ModelSpec& spec) {
  if (spec.layers < 1 || spec.width < 1 || spec.input < 1 || spec.classes < 2) {
    throw Error(Error::Kind::invalid_argument, "model needs layers >= 1, width >= 1, input >= 1, classes >= 2");
  }
  std::vector<int64_t> dims{spec.input};
  for (int l = 1; l < spec.layers; ++l) dims.push_back(spec.width);
  dims.push_back(spec.classes);
  return dims;
}

std::vector<ParameterInfo> parameter_layout(const ModelSpec& spec) {
  const auto dims = layer_dims(spec);
  std::vector<ParameterInfo> out;
  int64_t offset = 0;
  for (int l = 0; l < spec.layers; ++l) {
    const int64_t in = dims[static_cast<size_t>(l)], o = dims[static_cast<size_t>(l) + 1];
    const std::string prefix = "layer" + std::to_string(l);
    out.push_back({prefix + ".weight", o, in, offset, in});
    offset += o * in;
    out.push_back({prefix + ".bias", o, 1, offset, in});
    offset += o;
  }
  return out;
}

int64_t parameter_count(const ModelSpec& spec) {
  const auto layout = parameter_layout(spec);
  return layout.back().offset + layout.back().size();
}

void init_parameter(const ModelSpec& spec, const ParameterInfo& p, int64_t begin, int64_t end, double* out) {
  if (begin < 0 || end > p.size() || begin > end) throw Error(Error::Kind::invalid_argument, "init_parameter: bad range");
  const double bound = 1.0 / std::sqrt(static_cast<double>(p.fan_in));
  const uint64_t stream = name_hash(p.name);
  for (int64_t i = begin; i < end; ++i) {
    const double u = philox_uniform(spec.seed, stream, static_cast<uint64_t>(i));
    out[i - begin] = (2 * u - 1) * bound;
  }
}

std::vector<double> init_parameters(const ModelSpec& spec) {
  std::vector<double> all(static_cast<size_t>(parameter_count(spec)));
  for (const auto& p : parameter_layout(spec)) init_parameter(spec, p, 0, p.size(), all.data() + p.offset);
  return all;
}

namespace {
// Standard normal number `index` of a stream: Box-Muller on two Philox uniforms; 1 - u keeps
// the logarithm's argument in (0, 1].
double gaussian(uint64_t seed, uint64_t stream, uint64_t index) {
  const double u1 = 1.0 - philox_uniform(seed, stream, 2 * index);
  const double u2 = philox_uniform(seed, stream, 2 * index + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}
}  // namespace

Batch make_batch(const ModelSpec& spec, int64_t first, int64_t size) {
  Batch b;
  b.first = first;
  b.size = size;
  const auto in = static_cast<int64_t>(spec.input);
  b.x.resize(static_cast<size_t>(size * in));
  b.labels.resize(static_cast<size_t>(size));
  const uint64_t sample_stream = name_hash("sample"), teacher_stream = name_hash("teacher.weight");
  // Feature f of sample i is normal number i * input + f of one stream: unique per (i, f).
  for (int64_t s = 0; s < size; ++s) {
    const auto i = static_cast<uint64_t>(first + s);
    double* x = b.x.data() + s * in;
    for (int64_t f = 0; f < in; ++f) x[f] = gaussian(spec.data_seed, sample_stream, i * static_cast<uint64_t>(in) + static_cast<uint64_t>(f));
    int32_t best = 0;
    double best_score = -INFINITY;
    for (int c = 0; c < spec.classes; ++c) {
      double score = 0;
      for (int64_t f = 0; f < in; ++f) {
        score += gaussian(spec.data_seed, teacher_stream, static_cast<uint64_t>(c * in + f)) * x[f];
      }
      if (score > best_score) {
        best_score = score;
        best = c;
      }
    }
    b.labels[static_cast<size_t>(s)] = best;
  }
  return b;
}

}  // namespace dts

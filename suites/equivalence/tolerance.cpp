// The per-parameter equivalence bound of tolerance.h: the gradient error model, then interval
// propagation through SGD with momentum or AdamW along the reference's own trajectory.
#include "suites/equivalence/tolerance.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace dts {

const PrecisionModel& precision_model(Precision precision) {
  static const PrecisionModel kF64{"f64", 0x1p-53, 0x1p-53, 0};
  static const PrecisionModel kF32{"f32", 0x1p-24, 0x1p-24, 0};
  // bf16 compute: f32 masters and f32 accumulation; 4 u_bf16 for the extra roundings (tolerance.h).
  static const PrecisionModel kBf16{"bf16", 0x1p-24, 0x1p-24, 4 * 0x1p-8};
  switch (precision) {
    case Precision::f64: return kF64;
    case Precision::f32: return kF32;
    case Precision::bf16: return kBf16;
  }
  return kF32;
}

EquivalenceBound::EquivalenceBound(const TrainConfig& train, const PrecisionModel& model, int64_t batch_rows,
                                   std::vector<double> initial, int64_t reordered_terms)
    : train_(train), model_(model), batch_rows_(batch_rows), reordered_terms_(reordered_terms),
      params_(std::move(initial)) {
  if (batch_rows < 1) throw Error(Error::Kind::invalid_argument, "equivalence bound: empty batch");
  if (reordered_terms < 0) throw Error(Error::Kind::invalid_argument, "equivalence bound: negative reordered terms");
  gradient_factor_ = 2.0 * static_cast<double>(batch_rows - 1 + reordered_terms) * model.accumulation_roundoff +
                     model.mixed_term;
  const size_t n = params_.size();
  state1_.assign(n, 0);
  state2_.assign(n, 0);
  error_params_.assign(n, 0);
  error_state1_.assign(n, 0);
  error_state2_.assign(n, 0);
}

void EquivalenceBound::add_step(const StepTrace& trace) {
  const size_t n = params_.size();
  if (trace.gradients.size() != n || trace.magnitudes.size() != n) {
    throw Error(Error::Kind::invalid_argument, "equivalence bound: step trace does not match the model");
  }
  ++steps_;
  const double u = model_.unit_roundoff;
  if (train_.optimizer == OptimizerKind::sgd) {
    const double lr = train_.sgd.lr, mu = train_.sgd.momentum, wd = train_.sgd.weight_decay;
    for (size_t i = 0; i < n; ++i) {
      const double g = trace.gradients[i] + wd * params_[i];
      const double e_g = gradient_factor_ * trace.magnitudes[i] + wd * error_params_[i] +
                         2 * u * (std::fabs(wd * params_[i]) + std::fabs(g));
      const double v = mu * state1_[i] + g;
      error_state1_[i] = mu * error_state1_[i] + e_g + 2 * u * (std::fabs(mu * state1_[i]) + std::fabs(v));
      state1_[i] = v;
      const double p = params_[i] - lr * v;
      error_params_[i] += lr * error_state1_[i] + 2 * u * (std::fabs(lr * v) + std::fabs(p));
      params_[i] = p;
    }
    return;
  }
  const auto& a = train_.adamw;
  const double t = static_cast<double>(steps_);
  const double step_size = a.lr / (1.0 - std::pow(a.beta1, t));
  const double inv_sqrt_bc2 = 1.0 / std::sqrt(1.0 - std::pow(a.beta2, t));
  const double decay = 1.0 - a.lr * a.weight_decay;
  const auto update = [&](double m, double v) { return step_size * m / (std::sqrt(v) * inv_sqrt_bc2 + a.eps); };
  double ratio_sum = 0;
  for (int64_t k = 0; k < steps_; ++k) ratio_sum += std::pow(a.beta1 * a.beta1 / a.beta2, static_cast<double>(k));
  const double largest_update =
      step_size * (1 - a.beta1) / std::sqrt(1 - a.beta2) * std::sqrt(ratio_sum) / inv_sqrt_bc2;
  for (size_t i = 0; i < n; ++i) {
    const double g = trace.gradients[i];
    const double e_g = gradient_factor_ * trace.magnitudes[i];
    const double m = a.beta1 * state1_[i] + (1 - a.beta1) * g;
    const double v = a.beta2 * state2_[i] + (1 - a.beta2) * g * g;
    const double e_m = a.beta1 * error_state1_[i] + (1 - a.beta1) * e_g +
                       2 * u * (a.beta1 * std::fabs(state1_[i]) + (1 - a.beta1) * std::fabs(g) + std::fabs(m));
    const double e_v = a.beta2 * error_state2_[i] + (1 - a.beta2) * (2 * std::fabs(g) * e_g + e_g * e_g) +
                       2 * u * (a.beta2 * state2_[i] + 2 * (1 - a.beta2) * g * g + v);
    const double center = update(m, v);
    double e_update = 0;
    for (const double corner_m : {m - e_m, m + e_m}) {
      for (const double corner_v : {std::max(0.0, v - e_v), v + e_v}) {
        e_update = std::max(e_update, std::fabs(update(corner_m, corner_v) - center));
      }
    }
    // The box treats m and v as independent, but each run's m and v come from its own gradients:
    // by Cauchy-Schwarz |m| <= (1 - b1) / sqrt(1 - b2) * sqrt(sum_{k<t} (b1^2 / b2)^k) * sqrt(v), so
    // no run's update exceeds step_size * that / inv_sqrt_bc2, and two runs differ by at most
    // that plus the reference's own (where v's interval reaches 0, the box alone would allow m/eps).
    e_update = std::min(e_update, std::fabs(center) + largest_update);
    e_update += 2 * u * 5 * std::fabs(center);  // sqrt, multiply, add, multiply, divide
    const double p = params_[i] * decay - center;
    error_params_[i] = decay * error_params_[i] + e_update + 2 * u * (std::fabs(params_[i] * decay) + std::fabs(p));
    params_[i] = p;
    state1_[i] = m;
    state2_[i] = v;
    error_state1_[i] = e_m;
    error_state2_[i] = e_v;
  }
}

int64_t device_kernel_terms(const ModelSpec& spec) {
  const std::vector<int64_t> dims = layer_dims(spec);
  int64_t terms = kDeviceSoftmaxTerms;
  for (size_t l = 0; l + 1 < dims.size(); ++l) {
    terms += dims[l] - 1;                        // forward: z = a W^T over in features
    if (l > 0) terms += dims[l + 1] - 1;         // backward: da = g W over out features
    if (l + 2 < dims.size()) terms += kDeviceGeluTerms;  // a hidden layer's GeLU, forward and back
  }
  return terms;
}

std::string EquivalenceBound::describe() const {
  const double largest = error_params_.empty() ? 0 : *std::max_element(error_params_.begin(), error_params_.end());
  char text[400];
  std::snprintf(text, sizeof(text),
                "per-parameter bound (suites/equivalence/tolerance.h), %s: e_g = (2(B-1+R)u_acc + c_mixed) M = "
                "(2*(%lld+%lld)*%g + %g) M, through %s for %lld steps; largest bound %.3g",
                model_.name, static_cast<long long>(batch_rows_ - 1), static_cast<long long>(reordered_terms_),
                model_.accumulation_roundoff, model_.mixed_term,
                train_.optimizer == OptimizerKind::sgd ? "sgd" : "adamw", static_cast<long long>(steps_), largest);
  return text;
}

namespace {

// A fixed +-1 per (run, step, element): splitmix64 of the three, so runs are reproducible.
double random_sign(uint64_t run, uint64_t step, uint64_t element) {
  uint64_t z = (run * 0x9e3779b97f4a7c15ull) ^ (step * 0xbf58476d1ce4e5b9ull) ^ (element + 0x94d049bb133111ebull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (z & 1) ? 1.0 : -1.0;
}

template <class T>
ReferenceWithBound reference_run(const ModelSpec& spec, const TrainConfig& train, Precision precision, int steps,
                                 int64_t batch_rows, int64_t reordered_terms) {
  const PrecisionModel& model = precision_model(precision);
  SingleTrainer<T> single(spec, train, compute_of(precision));
  EquivalenceBound bound(train, model, batch_rows, init_parameters(spec), reordered_terms);
  StepTrace trace;
  for (int s = 0; s < steps; ++s) {
    single.step(make_batch(spec, static_cast<int64_t>(s) * batch_rows, batch_rows), &trace);
    bound.add_step(trace);
  }
  ReferenceWithBound result{single.parameters(), bound.bound(), bound.describe()};
  std::vector<double> feedback(result.parameters.size(), 0.0);  // 2 max_k |p_k - p_ref|
  for (int k = 0; k < kSensitivityRuns; ++k) {
    SingleTrainer<T> perturbed(spec, train, compute_of(precision));
    for (int s = 0; s < steps; ++s) {
      perturbed.step(make_batch(spec, static_cast<int64_t>(s) * batch_rows, batch_rows), nullptr,
                     [&](size_t i, double magnitude) {
                       // Run 0 draws new signs every step; run 1 keeps each element's sign for
                       // all steps, the worst case when real errors are correlated over steps
                       // (rounding a systematically split sum), which add up linearly.
                       const uint64_t step = k == 1 ? 0 : static_cast<uint64_t>(s);
                       return random_sign(static_cast<uint64_t>(k), step, i) *
                              bound.gradient_factor() * magnitude;
                     });
    }
    const std::vector<double> moved = perturbed.parameters();
    for (size_t i = 0; i < moved.size(); ++i) {
      feedback[i] = std::max(feedback[i], 2 * std::fabs(moved[i] - result.parameters[i]));
    }
  }
  for (size_t i = 0; i < feedback.size(); ++i) result.bound[i] += feedback[i];
  const double largest_sensitivity = feedback.empty() ? 0 : *std::max_element(feedback.begin(), feedback.end());
  char text[96];
  std::snprintf(text, sizeof(text), "; plus feedback measured by %d perturbed runs, largest %.3g", kSensitivityRuns,
                largest_sensitivity);
  result.description += text;
  return result;
}

}  // namespace

ReferenceWithBound reference_with_bound(const ModelSpec& spec, const TrainConfig& train, Precision precision,
                                        int steps, int64_t batch_rows, int64_t reordered_terms) {
  if (precision == Precision::f64) {
    return reference_run<double>(spec, train, precision, steps, batch_rows, reordered_terms);
  }
  return reference_run<float>(spec, train, precision, steps, batch_rows, reordered_terms);
}

BoundCheck check_against_bound(const std::vector<double>& actual, const std::vector<double>& reference,
                               const std::vector<double>& bound) {
  if (actual.size() != reference.size() || actual.size() != bound.size()) {
    throw Error(Error::Kind::invalid_argument, "check_against_bound: sizes differ");
  }
  BoundCheck check;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double error = std::fabs(actual[i] - reference[i]);
    check.max_abs_error = std::max(check.max_abs_error, error);
    // NaN errors (a NaN parameter) must fail: !(error <= bound) catches them.
    const bool within = error <= bound[i];
    if (!within) ++check.violations;
    const double ratio = error == 0 ? 0 : (bound[i] > 0 ? error / bound[i] : INFINITY);
    if (!(ratio <= check.max_ratio)) {
      check.max_ratio = std::isnan(ratio) ? INFINITY : ratio;
      check.worst = static_cast<int64_t>(i);
    }
  }
  return check;
}

}  // namespace dts

// The SGD equivalence bound of tolerance.h.
#include "suites/equivalence/tolerance.h"

#include <cstdio>

namespace dts {

namespace {
constexpr double kActivationBound = 8;  // A in tolerance.h
}

EquivalenceTolerance sgd_equivalence_tolerance(int steps, double lr, double momentum, int batch_rows,
                                               double unit_roundoff) {
  const double gradient = 2.0 * (batch_rows - 1) * unit_roundoff * kActivationBound;
  EquivalenceTolerance t;
  t.max_abs_error = steps * lr / (1 - momentum) * gradient;
  char text[256];
  std::snprintf(text, sizeof(text), "S*lr/(1-mu)*2(B-1)u*A = %d*%g/(1-%g)*2*%d*%g*%g = %.3g", steps, lr, momentum,
                batch_rows - 1, unit_roundoff, kActivationBound, t.max_abs_error);
  t.formula = text;
  return t;
}

}  // namespace dts

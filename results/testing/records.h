// Rows of a collectives case for tests of the readers of result files (compare, ab, report):
// built from one `base` row that names the case.
#pragma once
#include <string>

#include "results/record.h"

namespace dts::testing {

// The case's correctness row: `wrong` elements, none, the check passed.
inline Record passing_wrong_row(const Record& base) {
  Record wrong = base;
  wrong.metric = "wrong";
  wrong.unit = "elements";
  wrong.value = 0;
  wrong.verdict = Verdict::pass;
  wrong.threshold = 0;
  return wrong;
}

}  // namespace dts::testing

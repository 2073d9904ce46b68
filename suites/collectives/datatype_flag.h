// -d/--datatype as the suites other than collectives read it: the collectives' flag group
// (collectives_suite.cpp) is a DatatypeSelection, so the equivalence suite takes its precisions
// from the same flag with options.flags<DatatypeSelection>().
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "suites/suite.h"

namespace dts {

class DatatypeSelection : public FlagGroup {
 public:
  static constexpr const char* kGroup = "collectives";
  // The suites that read -d: collectives runs every dtype it names, equivalence the precisions
  // among them. -d given with neither in the run is refused (it would change nothing).
  static constexpr std::string_view kReadBy[] = {"collectives", "equivalence"};

  // The dtypes -d named, in its order; nullopt when it was left out or `all` (each suite then
  // takes its own full set: --quick's smaller collectives set does not narrow the others).
  std::optional<std::vector<DType>> requested;
};

}  // namespace dts

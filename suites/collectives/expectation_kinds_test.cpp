// The deviation kinds an expectation file may waive are the collectives check's own
// (deviation_vocabulary, registered in the suite catalog): the shipped files parse against them,
// every kind reads back from a wrong row's detail, and "wrong value" is never among them.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "results/catalog.h"
#include "results/expectations.h"
#include "suites/collectives/check.h"

namespace dts {
namespace {

TEST(ExpectationKinds, TheCatalogHoldsTheChecksVocabulary) {
  const std::vector<DeviationKind> kinds = catalog_deviation_kinds();
  std::set<std::string> texts;
  for (const DeviationKind& k : kinds) texts.insert(k.kind);
  EXPECT_EQ(texts.count("wrong value"), 0u);  // an unclassified failure is never waivable
  for (const char* kind : {"saturates at 127", "saturates at -128", "NaN dropped by min", "NaN dropped by max",
                           "compares u64 as signed", "a partial sum saturates", "NaN payload changed"}) {
    EXPECT_EQ(texts.count(kind), 1u) << kind;
  }
  // Each kind, as a wrong row's detail prints it, reads back as itself.
  for (const std::string& kind : texts) {
    const std::string detail = "overflow inputs: 3 wrong (stated semantics): " + kind + ": 3; first: x";
    EXPECT_EQ(deviation_kinds(detail), std::vector<std::string>{kind}) << kind;
  }
  // NaN dropped by max is carried by max rows only; data movement's kinds by redop=none rows.
  for (const DeviationKind& k : kinds) {
    if (k.kind == "NaN dropped by max") {
      EXPECT_EQ(k.redop, "max");
    }
    if (k.kind == "NaN dropped by the copy") {
      EXPECT_EQ(k.redop, "none");
    }
  }
}

TEST(ExpectationKinds, ShippedFilesParse) {
  for (const char* name : {"openmpi-4.1.toml", "mpich-4.0.toml", "gloo-0.5.toml"}) {
    const ExpectationFile file = load_expectations(std::string(DTS_EXPECTATIONS_DIR) + "/" + name);
    EXPECT_FALSE(file.entries.empty()) << name;
    for (const Expectation& e : file.entries) EXPECT_FALSE(e.citation.empty()) << name << " #" << e.index;
  }
}

}  // namespace
}  // namespace dts

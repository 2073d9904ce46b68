// Ranges of integers (core/ranges.h), against lists written out by hand.
#include "core/ranges.h"

#include <gtest/gtest.h>

namespace dts {
namespace {

TEST(Ranges, RunsAndSingles) {
  EXPECT_EQ(format_ranges({}), "");
  EXPECT_EQ(format_ranges({0}), "0");
  EXPECT_EQ(format_ranges({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
  EXPECT_EQ(format_ranges({3, 2}), "3,2");  // in the order given: a run only counts up
}

TEST(Ranges, ParsedBackAndBadPiecesLeftOutWhole) {
  EXPECT_EQ(parse_ranges("0-2,5,7-8", 16), (std::vector<int>{0, 1, 2, 5, 7, 8}));
  EXPECT_EQ(parse_ranges(format_ranges({1, 3, 4, 5, 9}), 16), (std::vector<int>{1, 3, 4, 5, 9}));
  EXPECT_EQ(parse_ranges("", 16), std::vector<int>{});
  for (const char* bad : {"x", "-3", "5-", "4-2", "2-x", "1-2-3", " 1", "99999999999", "16", "0-16", ","}) {
    EXPECT_EQ(parse_ranges(bad, 16), std::vector<int>{}) << bad;
  }
  EXPECT_EQ(parse_ranges("x,2,,3-4", 16), (std::vector<int>{2, 3, 4}));  // the rest still read
  // A bad file's "0-2000000000" under a limit of 2^20 allocates nothing.
  EXPECT_EQ(parse_ranges("0-2000000000,7", 1 << 20), std::vector<int>{7});
}

}  // namespace
}  // namespace dts

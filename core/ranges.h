// Lists of small non-negative integers as ranges, "0-2,5,7-8": ranks in the inventory and the
// report, CPUs in an affinity mask (the spelling of Linux's cpulist files).
#pragma once
#include <string>
#include <vector>

namespace dts {

// 0 1 2 5 7 8 -> "0-2,5,7-8": runs of consecutive values in the order given; "" for none.
std::string format_ranges(const std::vector<int>& values);

// "0-2,5" -> 0 1 2 5. A piece that is not a number or a range lo-hi with lo <= hi, or that
// reaches `limit` or past it, is left out whole: what a bad file says allocates at most `limit`
// values a piece.
std::vector<int> parse_ranges(const std::string& text, int limit);

}  // namespace dts

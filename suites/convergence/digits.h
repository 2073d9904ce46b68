// The handwritten-digits data set the convergence suite trains on (data/digits.csv.gz; source,
// licence and format in data/README.md): read with zlib and fast-cpp-csv-parser's line reader,
// every value checked, so a damaged file is one error naming the file and line.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "strategies/workload.h"

namespace dts {

struct LabeledData {
  int64_t samples = 0, features = 0, classes = 0;
  std::vector<double> x;         // samples x features, row-major
  std::vector<int32_t> labels;   // samples, in [0, classes)
};

inline constexpr int64_t kDigitsFeatures = 64;  // 8 x 8 pixels
inline constexpr int64_t kDigitsClasses = 10;
inline constexpr int kDigitsMaxPixel = 16;      // a pixel counts the on pixels of a 4 x 4 block

// Reads a gzip-compressed digits CSV (a plain CSV reads too: zlib passes it through). Throws
// Error{io} naming the file when it cannot be opened or decompressed (truncated), and
// Error{invalid_argument} naming file:line for a line that is not 64 pixels in 0..16 and a label
// in 0..9, or a file with no samples.
LabeledData load_digits(const std::string& path);

// The digits file shipped with the sources (set at build time), for tests and the suite's default.
std::string default_digits_path();

// Rows [first, first + count) as a training batch (features scaled by 1 / kDigitsMaxPixel).
Batch batch_of(const LabeledData& data, int64_t first, int64_t count);

}  // namespace dts

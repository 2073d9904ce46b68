// The handwritten-digits data set the convergence suite trains on (data/digits.csv.gz; source,
// licence and format in data/README.md): inflated with zlib, every value checked, so a damaged
// file is one error naming the file and line, and every size bounded, so no file can exhaust the
// memory of the ranks that read it.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/input_file.h"
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

// Bounds of a --data file, far past the shipped set's 1,797 samples and 57,512 bytes: a line
// holds 64 pixels of at most 2 digits and a label, 194 bytes with its commas (256 with room for a
// CR and spaces); at most 100,000 samples (about 52 MB per rank as doubles); as read (gzip or
// not) at most 32 MiB, inflated at most 64 MiB.
inline constexpr int64_t kDigitsMaxLine = 256;
inline constexpr int64_t kDigitsMaxSamples = 100000;
inline constexpr int64_t kDigitsMaxFile = int64_t{32} << 20;
inline constexpr int64_t kDigitsMaxText = int64_t{64} << 20;

// A digits CSV from its bytes, gzip-compressed or plain; `name` stands for the file in messages.
// Throws Error{io} naming it when the gzip stream is damaged or truncated, and
// Error{invalid_argument} naming name:line for a line that is not 64 pixels in 0..16 and a label
// in 0..9, a line or text past the bounds above, or no samples.
LabeledData parse_digits(std::string_view bytes, const std::string& name);
// The limits a --data file is read with (read_input_file, or the harness's shared read).
InputLimits digits_file_limits();
// parse_digits of a file read here (errors of core/input_file.h too: a device, a FIFO's timeout).
LabeledData load_digits(const std::string& path);

// The digits file shipped with the sources (set at build time), for tests and the suite's default.
std::string default_digits_path();

// Rows [first, first + count) as a training batch (features scaled by 1 / kDigitsMaxPixel).
Batch batch_of(const LabeledData& data, int64_t first, int64_t count);

}  // namespace dts

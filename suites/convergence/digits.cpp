// Reading data/digits.csv.gz (digits.h): zlib inflates the file into memory, fast-cpp-csv-parser's
// LineReader splits it into lines (as results/csv_reader.cpp reads results), and each field is
// parsed with std::from_chars, so a bad value is reported at its line instead of read as 0.
#include "suites/convergence/digits.h"

#include <zlib.h>

#include <charconv>
#include <limits>
#include <memory>
#include <string_view>

// fast-cpp-csv-parser copies file names with strncpy, which GCC flags under -Wall.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-truncation"
#include <libfccp/csv.h>
#pragma GCC diagnostic pop

#include "core/error.h"

#ifndef DTS_DIGITS_PATH
#define DTS_DIGITS_PATH "suites/convergence/data/digits.csv.gz"
#endif

namespace dts {

namespace {

std::string inflate_file(const std::string& path) {
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  if (!file) throw Error(Error::Kind::io, path + ": cannot open");
  std::string text;
  char chunk[1 << 16];
  for (;;) {
    const int n = gzread(file.get(), chunk, sizeof(chunk));
    if (n < 0) {
      int code = 0;
      const char* why = gzerror(file.get(), &code);
      throw Error(Error::Kind::io, path + ": cannot decompress: " + (why ? why : "zlib error"));
    }
    if (n == 0) break;
    text.append(chunk, static_cast<size_t>(n));
  }
  // gzread stops quietly at a truncated stream's end; gzerror then says so.
  int code = Z_OK;
  const char* why = gzerror(file.get(), &code);
  if (code != Z_OK && code != Z_STREAM_END) {
    throw Error(Error::Kind::io, path + ": cannot decompress: " + (why ? why : "zlib error"));
  }
  return text;
}

// One sample a line; appends to `data`.
void read_lines(const std::string& path, const std::string& text, LabeledData& data) {
  io::LineReader lines(path, text.data(), text.data() + text.size());
  data.features = kDigitsFeatures;
  data.classes = kDigitsClasses;
  int64_t line_number = 0;
  while (const char* line = lines.next_line()) {
    ++line_number;
    const std::string_view row(line);
    if (row.empty()) continue;  // a final newline
    const auto bad = [&](const std::string& why) {
      return Error(Error::Kind::invalid_argument, path + ":" + std::to_string(line_number) + ": " + why);
    };
    size_t at = 0;
    for (int64_t field = 0; field <= kDigitsFeatures; ++field) {
      const size_t end = std::min(row.find(',', at), row.size());
      if (at > row.size()) throw bad("expected 65 fields (64 pixels and a label), found " + std::to_string(field));
      int value = -1;
      const auto [stop, error] = std::from_chars(row.data() + at, row.data() + end, value);
      if (error != std::errc{} || stop != row.data() + end) {
        throw bad("field " + std::to_string(field + 1) + " is not an integer: '" +
                  std::string(row.substr(at, end - at)) + "'");
      }
      if (field < kDigitsFeatures) {
        if (value < 0 || value > kDigitsMaxPixel) throw bad("pixel " + std::to_string(value) + " is outside 0..16");
        data.x.push_back(value);
      } else {
        if (value < 0 || value >= kDigitsClasses) throw bad("label " + std::to_string(value) + " is outside 0..9");
        data.labels.push_back(value);
      }
      at = end + 1;
    }
    if (at <= row.size()) throw bad("more than 65 fields");
    ++data.samples;
  }
}

}  // namespace

LabeledData load_digits(const std::string& path) {
  const std::string text = inflate_file(path);
  LabeledData data;
  try {
    read_lines(path, text, data);
  } catch (const io::error::base& e) {  // fast-cpp-csv-parser's own (a line too long)
    throw Error(Error::Kind::invalid_argument, path + ": " + e.what());
  }
  if (data.samples == 0) throw Error(Error::Kind::invalid_argument, path + ": no samples");
  return data;
}

std::string default_digits_path() { return DTS_DIGITS_PATH; }

Batch batch_of(const LabeledData& data, int64_t first, int64_t count) {
  if (first < 0 || count < 0 || first + count > data.samples) {
    throw Error(Error::Kind::invalid_argument, "batch_of: rows out of range");
  }
  Batch batch;
  batch.first = first;
  batch.size = count;
  const auto begin = data.x.begin() + first * data.features;
  batch.x.reserve(static_cast<size_t>(count * data.features));
  // Pixels in 0..16 scaled to 0..1, so the MLP's inputs have the scale of the synthetic set's.
  for (auto it = begin; it != begin + count * data.features; ++it) batch.x.push_back(*it / kDigitsMaxPixel);
  batch.labels.assign(data.labels.begin() + first, data.labels.begin() + first + count);
  return batch;
}

}  // namespace dts

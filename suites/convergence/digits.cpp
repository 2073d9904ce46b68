// Reading data/digits.csv.gz (digits.h): the file's bytes (read once, bounded: core/input_file.h)
// are inflated by zlib in pieces when they are gzip, split into lines as they come (each line
// bounded), and each field parsed with std::from_chars, so a bad value is reported at its line
// instead of read as 0, and no input makes the reader hold more than the samples it keeps.
#include "suites/convergence/digits.h"

#include <zlib.h>

#include <charconv>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string_view>

#include "core/error.h"
#include "core/input_file.h"

#ifndef DTS_DIGITS_PATH
#define DTS_DIGITS_PATH "suites/convergence/data/digits.csv.gz"
#endif

namespace dts {

namespace {

// One sample a line; appends to `data`. `line_number` counts from 1.
void read_line(const std::string& name, int64_t line_number, std::string_view row, LabeledData& data) {
  if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
  if (row.empty()) return;  // a final newline, or a blank line
  const auto bad = [&](const std::string& why) {
    return Error(Error::Kind::invalid_argument, name + ":" + std::to_string(line_number) + ": " + why);
  };
  if (data.samples >= kDigitsMaxSamples) {
    throw bad("more than " + std::to_string(kDigitsMaxSamples) + " samples, the most a --data file may hold");
  }
  size_t at = 0;
  for (int64_t field = 0; field <= kDigitsFeatures; ++field) {
    const size_t end = std::min(row.find(',', at), row.size());
    if (at > row.size()) throw bad("expected 65 fields (64 pixels and a label), found " + std::to_string(field));
    int value = -1;
    const auto [stop, error] = std::from_chars(row.data() + at, row.data() + end, value);
    if (error != std::errc{} || stop != row.data() + end) {
      throw bad("field " + std::to_string(field + 1) + " is not an integer: '" + std::string(row.substr(at, end - at)) + "'");
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

// Splits text that arrives in pieces into lines, each within the bounds (InputBounds: no line
// past kDigitsMaxLine, no more than kDigitsMaxText in all), for read_line.
class LineSplitter {
 public:
  LineSplitter(const std::string& name, LabeledData& data)
      : name_(name), data_(data), bounds_(name, "--data file (decompressed)", digits_text_limits()) {}
  void feed(const char* bytes, size_t count) {
    bounds_.account(bytes, count);
    const char* end = bytes + count;
    while (bytes < end) {
      const char* newline = static_cast<const char*>(std::memchr(bytes, '\n', static_cast<size_t>(end - bytes)));
      if (!newline) {
        pending_.append(bytes, end);
        return;
      }
      pending_.append(bytes, newline);
      read_line(name_, ++line_, pending_, data_);
      pending_.clear();
      bytes = newline + 1;
    }
  }
  void finish() {
    if (!pending_.empty()) read_line(name_, ++line_, pending_, data_);
  }

 private:
  static InputLimits digits_text_limits() {
    InputLimits limits;
    limits.max_line = kDigitsMaxLine;
    limits.max_bytes = kDigitsMaxText;
    return limits;
  }
  const std::string& name_;
  LabeledData& data_;
  InputBounds bounds_;
  std::string pending_;
  int64_t line_ = 0;
};

bool is_gzip(std::string_view bytes) { return bytes.size() >= 2 && bytes[0] == '\x1f' && bytes[1] == '\x8b'; }

// Inflates gzip members one after another (as gzip -d and gzread do), handing each piece on.
void inflate_gzip(const std::string& name, std::string_view bytes, LineSplitter& lines) {
  z_stream stream{};
  if (inflateInit2(&stream, 16 + MAX_WBITS) != Z_OK) throw Error(Error::Kind::io, name + ": cannot decompress: zlib");
  std::unique_ptr<z_stream, int (*)(z_stream*)> owner(&stream, inflateEnd);
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());  // bytes.size() <= kDigitsMaxFile: fits
  char out[1 << 16];
  for (;;) {
    stream.next_out = reinterpret_cast<Bytef*>(out);
    stream.avail_out = sizeof out;
    const int result = inflate(&stream, Z_NO_FLUSH);
    lines.feed(out, sizeof out - stream.avail_out);
    if (result == Z_STREAM_END) {
      if (stream.avail_in == 0) return;
      if (inflateReset(&stream) != Z_OK) throw Error(Error::Kind::io, name + ": cannot decompress: zlib");
      continue;  // another member follows
    }
    if (result == Z_OK) continue;
    if (result == Z_BUF_ERROR && stream.avail_in == 0) {
      throw Error(Error::Kind::io, name + ": cannot decompress: the gzip stream is truncated");
    }
    throw Error(Error::Kind::io, name + ": cannot decompress: " + (stream.msg ? stream.msg : "zlib error"));
  }
}

}  // namespace

LabeledData parse_digits(std::string_view bytes, const std::string& name) {
  LabeledData data;
  data.features = kDigitsFeatures;
  data.classes = kDigitsClasses;
  LineSplitter lines(name, data);
  if (is_gzip(bytes)) {
    inflate_gzip(name, bytes, lines);
  } else {
    lines.feed(bytes.data(), bytes.size());
  }
  lines.finish();
  if (data.samples == 0) throw Error(Error::Kind::invalid_argument, name + ": no samples");
  return data;
}

InputLimits digits_file_limits() {
  InputLimits limits;
  limits.max_bytes = kDigitsMaxFile;
  return limits;
}

LabeledData load_digits(const std::string& path) {
  return parse_digits(read_input_file(path, "--data file", digits_file_limits()), path);
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

// The digits data set reader (digits.h): the shipped file reads whole, and a missing, truncated or
// malformed file is one error naming the file (and the line). Run: ctest -R digits_test.
#include "suites/convergence/digits.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"

namespace dts {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("dts_digits_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  return dir / name;
}

void write(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string error_of(const std::string& path) {
  try {
    load_digits(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A well-formed line: 64 pixels, then the label.
std::string line(int pixel, int label) {
  std::string text;
  for (int i = 0; i < 64; ++i) text += std::to_string(pixel) + ",";
  return text + std::to_string(label) + "\n";
}

TEST(Digits, ShippedFileReadsWhole) {
  const LabeledData data = load_digits(default_digits_path());
  // data/README.md: 1,797 samples of 64 pixels in 0..16 and a digit 0..9.
  ASSERT_EQ(data.samples, 1797);
  EXPECT_EQ(data.features, 64);
  EXPECT_EQ(data.x.size(), 1797u * 64);
  std::vector<int> per_class(10, 0);
  for (int32_t label : data.labels) ++per_class[static_cast<size_t>(label)];
  // The UCI test set is balanced: every digit has 174..183 samples.
  for (int count : per_class) {
    EXPECT_GE(count, 174);
    EXPECT_LE(count, 183);
  }
  // The first line of the file: "0,0,5,13,9,1,0,0,..." with label 0.
  EXPECT_EQ(data.x[2], 5);
  EXPECT_EQ(data.x[3], 13);
  EXPECT_EQ(data.labels[0], 0);
  const Batch batch = batch_of(data, 1, 2);
  ASSERT_EQ(batch.x.size(), 128u);
  EXPECT_EQ(batch.x[3], 12.0 / 16);  // line 2's fourth pixel, 12, scaled by 1/16
  EXPECT_EQ(batch.labels[0], 1);
  EXPECT_THROW(batch_of(data, 1796, 2), Error);
}

TEST(Digits, PlainCsvReadsToo) {
  const fs::path path = scratch("plain.csv");
  write(path, line(16, 9) + line(0, 0));
  const LabeledData data = load_digits(path.string());
  EXPECT_EQ(data.samples, 2);
  EXPECT_EQ(data.labels[0], 9);
}

TEST(Digits, DamagedFilesNameFileAndLine) {
  EXPECT_NE(error_of(scratch("missing.csv.gz").string()).find("missing.csv.gz: cannot open"), std::string::npos);
  const auto malformed = [](const std::string& name, const std::string& second_line, const std::string& why) {
    const fs::path path = scratch(name);
    write(path, line(1, 1) + second_line);
    const std::string message = error_of(path.string());
    EXPECT_NE(message.find(name + ":2: "), std::string::npos) << message;
    EXPECT_NE(message.find(why), std::string::npos) << message;
  };
  std::string short_line = line(1, 1);
  short_line.erase(short_line.find(','), 2);  // one field fewer
  malformed("short.csv", short_line, "expected 65 fields");
  std::string long_line = line(1, 1);
  long_line.insert(0, "1,");
  malformed("long.csv", long_line, "more than 65 fields");
  malformed("pixel.csv", line(17, 1), "outside 0..16");
  malformed("label.csv", line(1, 10), "outside 0..9");
  std::string letter = line(1, 1);
  letter[0] = 'x';
  malformed("letter.csv", letter, "not an integer");
  const fs::path empty = scratch("empty.csv");
  write(empty, "");
  EXPECT_NE(error_of(empty.string()).find("no samples"), std::string::npos);
}

TEST(Digits, TruncatedGzipIsAnIoError) {
  // The shipped file cut in half: zlib reports the stream ended early.
  std::ifstream in(default_digits_path(), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const fs::path path = scratch("truncated.csv.gz");
  write(path, bytes.substr(0, bytes.size() / 2));
  try {
    load_digits(path.string());
    ADD_FAILURE() << "a truncated file was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::io);
    EXPECT_NE(std::string(e.what()).find("truncated.csv.gz: cannot decompress"), std::string::npos) << e.what();
  }
}

// The scratch files go with the test binary's run.
class ScratchCleanup : public ::testing::Environment {
 public:
  void TearDown() override { fs::remove_all(scratch("x").parent_path()); }
};
const auto* const kCleanup = ::testing::AddGlobalTestEnvironment(new ScratchCleanup);

}  // namespace
}  // namespace dts

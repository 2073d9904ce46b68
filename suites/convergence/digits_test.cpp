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
  EXPECT_NE(error_of(scratch("missing.csv.gz").string()).find("missing.csv.gz': No such file or directory"),
            std::string::npos);
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

// /dev/zero grew each rank to 12 GB (the whole "file" was inflated into memory): refused as a
// device before it is read. The same bytes in a regular file, a line of many pixels, a file
// past the samples' bound, and a gzip of zeros (a bomb: 32 KiB that inflate to 32 MiB) are each
// refused at the first byte past a bound, naming it.
TEST(Digits, EveryInputIsBounded) {
  EXPECT_NE(error_of("/dev/zero").find("a character device"), std::string::npos) << error_of("/dev/zero");
  const fs::path zeros = scratch("zeros.csv");
  write(zeros, std::string(1 << 20, '\0'));
  EXPECT_NE(error_of(zeros.string()).find("zeros.csv:1: line longer than 256 bytes"), std::string::npos)
      << error_of(zeros.string());
  std::string too_many;
  for (int64_t i = 0; i <= kDigitsMaxSamples; ++i) too_many += "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1\n";
  const fs::path many = scratch("many.csv");
  write(many, too_many);
  EXPECT_NE(error_of(many.string()).find("many.csv:100001: more than 100000 samples"), std::string::npos)
      << error_of(many.string());
  // A gzip stream of 64 MiB + 1 zero bytes, made here with zlib: no newline ever, so the first
  // line's bound stops it after 256 bytes of inflated text, long before the text's own bound.
  std::string bomb;
  {
    z_stream z{};
    ASSERT_EQ(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    std::string input(1 << 20, '\0');
    std::string out(1 << 20, '\0');
    std::string gz;
    for (int chunk = 0; chunk < 64; ++chunk) {
      z.next_in = reinterpret_cast<Bytef*>(input.data());
      z.avail_in = static_cast<uInt>(input.size());
      do {
        z.next_out = reinterpret_cast<Bytef*>(out.data());
        z.avail_out = static_cast<uInt>(out.size());
        deflate(&z, chunk == 63 ? Z_FINISH : Z_NO_FLUSH);
        gz.append(out.data(), out.size() - z.avail_out);
      } while (z.avail_out == 0);
    }
    deflateEnd(&z);
    bomb = gz;
  }
  EXPECT_LT(bomb.size(), size_t{1} << 20);  // it compresses a thousandfold and more
  const fs::path gz = scratch("bomb.csv.gz");
  write(gz, bomb);
  EXPECT_NE(error_of(gz.string()).find("bomb.csv.gz:1: line longer than 256 bytes"), std::string::npos)
      << error_of(gz.string());
}

// The bytes of a file, as the harness hands them to every rank (read once by rank 0), parse as
// the file itself does.
TEST(Digits, BytesParseAsTheFileReads) {
  std::ifstream in(default_digits_path(), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const LabeledData from_bytes = parse_digits(bytes, "shipped");
  const LabeledData from_file = load_digits(default_digits_path());
  EXPECT_EQ(from_bytes.samples, from_file.samples);
  EXPECT_EQ(from_bytes.x, from_file.x);
  EXPECT_EQ(from_bytes.labels, from_file.labels);
  // Two gzip members one after the other (cat a.gz b.gz) read as one file, as gzip -d reads them.
  EXPECT_EQ(parse_digits(bytes + bytes, "twice").samples, 2 * from_file.samples);
}

// The scratch files go with the test binary's run.
class ScratchCleanup : public ::testing::Environment {
 public:
  void TearDown() override { fs::remove_all(scratch("x").parent_path()); }
};
const auto* const kCleanup = ::testing::AddGlobalTestEnvironment(new ScratchCleanup);

}  // namespace
}  // namespace dts

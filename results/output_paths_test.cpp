// Tests of check_outputs and open_output_file (results/output_paths.h): special files refused,
// outputs that are an input or each other refused, by identity rather than by spelling.
#include "results/output_paths.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "results/testing/file_size_limit.h"

namespace dts {
namespace {

namespace fs = std::filesystem;

class OutputPaths : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("dts_output_paths_test_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    previous_ = fs::current_path();
    fs::current_path(dir_);  // relative spellings below are relative to the scratch folder
  }
  void TearDown() override {
    fs::current_path(previous_);
    fs::remove_all(dir_);
  }
  static std::string message_of(const std::vector<NamedPath>& inputs, const std::vector<NamedPath>& outputs,
                                Error::Kind expected) {
    try {
      check_outputs(inputs, outputs);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), expected) << e.what();
      return e.what();
    }
    ADD_FAILURE() << "no error";
    return {};
  }
  fs::path dir_, previous_;
};

TEST_F(OutputPaths, DistinctFilesAndEmptyPathsPass) {
  std::ofstream("in.csv") << "x";
  EXPECT_NO_THROW(check_outputs({{"the input", "in.csv"}, {"--profile", ""}},
                                {{"--csv", "out.csv"}, {"--junit", ""}, {"--prom", "sub/out.prom"}}));
}

TEST_F(OutputPaths, TwoOutputsThatDoNotExistYetAreOneFileBySpelling) {
  const std::string what = message_of({}, {{"--csv", "./x.csv"}, {"--prom", "x.csv"}}, Error::Kind::invalid_argument);
  EXPECT_NE(what.find("--prom 'x.csv'"), std::string::npos) << what;
  EXPECT_NE(what.find("--csv './x.csv'"), std::string::npos) << what;
  message_of({}, {{"--csv", "a/../x.csv"}, {"--junit", (dir_ / "x.csv").string()}}, Error::Kind::invalid_argument);
  EXPECT_FALSE(fs::exists("x.csv"));  // nothing written
}

TEST_F(OutputPaths, AnOutputThatIsAnInputIsRefusedByInode) {
  std::ofstream("baseline.csv") << "x";
  fs::create_hard_link("baseline.csv", "other_name.csv");  // one inode, two spellings
  const std::string what = message_of({{"the baseline", "baseline.csv"}}, {{"--csv", "other_name.csv"}},
                                      Error::Kind::invalid_argument);
  EXPECT_NE(what.find("is the same file as the baseline 'baseline.csv': refusing to overwrite an input"), std::string::npos) << what;
  fs::create_symlink(dir_ / "baseline.csv", "link.csv");
  message_of({{"the input", "link.csv"}}, {{"-o", "./baseline.csv"}}, Error::Kind::invalid_argument);
}

TEST_F(OutputPaths, FifoAndDirectoryAreRefused) {
  ASSERT_EQ(::mkfifo("fifo", 0644), 0) << std::strerror(errno);
  std::string what = message_of({}, {{"--prom", "fifo"}}, Error::Kind::io);
  EXPECT_NE(what.find("a FIFO"), std::string::npos) << what;
  fs::create_directory("folder");
  what = message_of({}, {{"-o", "folder"}}, Error::Kind::io);
  EXPECT_NE(what.find("a directory"), std::string::npos) << what;
}

TEST_F(OutputPaths, OpenRefusesAFifoWithoutBlocking) {
  ASSERT_EQ(::mkfifo("fifo", 0644), 0) << std::strerror(errno);
  EXPECT_THROW(open_output_file({"--csv", "fifo"}, O_WRONLY), Error);  // no reader: a plain open() would hang
  std::ofstream("old.csv") << "old contents";
  const int fd = open_output_file({"--csv", "old.csv"}, O_WRONLY);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(::fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
  ::close(fd);
  EXPECT_EQ(fs::file_size("old.csv"), 0u);  // truncated, as CsvSink expects
}

TEST_F(OutputPaths, ReplaceWritesTheWholeTextAndCreatesFolders) {
  replace_file_atomically({"-o", "sub/report.html"}, "first");
  replace_file_atomically({"-o", "sub/report.html"}, "second, longer");
  std::ifstream in("sub/report.html");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "second, longer");
  EXPECT_EQ(std::distance(fs::directory_iterator("sub"), fs::directory_iterator()), 1);  // no temporary left
}

// A full disk in the middle of the text: the old file stays whole, no temporary is left, and the
// message names the flag, the path and the reason.
TEST_F(OutputPaths, ReplaceOnAFullDiskLeavesTheOldFileAsItWas) {
  std::ofstream("report.html") << "the old report";
  const std::string text(64 * 1024, 'x');  // past the 16 KiB the limit below allows
  std::string what;
  {
    testing::FileSizeLimit full_disk(16 * 1024);
    try {
      replace_file_atomically({"-o", "report.html"}, text);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::io);
      what = e.what();
    }
  }
  EXPECT_NE(what.find("-o 'report.html'"), std::string::npos) << what;
  EXPECT_NE(what.find(std::strerror(EFBIG)), std::string::npos) << what;
  std::ifstream in("report.html");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "the old report");
  EXPECT_EQ(std::distance(fs::directory_iterator("."), fs::directory_iterator()), 1);
}

TEST_F(OutputPaths, ReplaceRefusesSpecialFilesAndNamesAReadOnlyFolder) {
  ASSERT_EQ(::mkfifo("fifo", 0644), 0) << std::strerror(errno);
  EXPECT_THROW(replace_file_atomically({"--prom", "fifo"}, "x"), Error);
  EXPECT_TRUE(fs::is_fifo("fifo"));  // not renamed over
  // A folder where no file can be made (proc's: even root cannot): the OS's reason is named.
  if (fs::is_directory("/proc/self")) {
    try {
      replace_file_atomically({"--csv", "/proc/self/x.csv"}, "x");
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--csv '/proc/self/x.csv': " + std::string(std::strerror(ENOENT))),
                std::string::npos) << e.what();
    }
  }
  fs::create_directory("read_only");
  fs::permissions("read_only", fs::perms::owner_read | fs::perms::owner_exec);
  if (::access("read_only", W_OK) == 0) return;  // root writes to read-only folders
  try {
    replace_file_atomically({"--csv", "read_only/x.csv"}, "x");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::strerror(EACCES)), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dts

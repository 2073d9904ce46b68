// Tests of check_outputs and open_output_file (results/output_paths.h): special files refused,
// outputs that are an input or each other refused, by the file each path resolves to (links,
// dangling ones too, "..", hard links) rather than by spelling.
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

// The fault: `ln -s p.prom q.csv`, then --csv q.csv --prom p.prom. With p.prom not written yet the
// link dangles; stat saw no file and the spellings differ, so the CSV's rows went into p.prom and
// the Prometheus text then replaced them.
TEST_F(OutputPaths, ASymlinkToAnotherOutputIsThatOutputDanglingOrNot) {
  fs::create_symlink("p.prom", "q.csv");
  const std::string what = message_of({}, {{"--prom", "p.prom"}, {"--csv", "q.csv"}}, Error::Kind::invalid_argument);
  EXPECT_NE(what.find("--csv 'q.csv' is the same file as --prom 'p.prom': each output needs a file of its own"),
            std::string::npos) << what;
  message_of({}, {{"--csv", "q.csv"}, {"--prom", "p.prom"}}, Error::Kind::invalid_argument);  // either order
  fs::create_symlink(dir_ / "absent" / "j.xml", "absolute.csv");  // an absolute target, in a folder not made yet
  message_of({}, {{"--junit", "absent/j.xml"}, {"--csv", "absolute.csv"}}, Error::Kind::invalid_argument);
  EXPECT_FALSE(fs::exists("p.prom"));
  EXPECT_FALSE(fs::exists("absent"));
}

// q.csv -> ../s4/j.xml read from the link's folder, not from the working folder: here the link
// sits in a folder reached through another link, so the spelling points somewhere else entirely.
TEST_F(OutputPaths, ADanglingLinkThroughDotDotIsReadFromTheLinksOwnFolder) {
  fs::create_directories("s4");
  fs::current_path("s4");
  fs::create_symlink("../s4/j.xml", "q.csv");
  message_of({}, {{"--junit", "j.xml"}, {"--csv", "q.csv"}}, Error::Kind::invalid_argument);
  fs::current_path(dir_);
  fs::create_directories("real/runs");
  fs::create_symlink(dir_ / "real" / "runs", "runs_link");
  fs::create_symlink("../j.xml", "real/runs/q.csv");  // from real/runs: real/j.xml, not ./j.xml
  message_of({}, {{"--junit", "real/j.xml"}, {"--csv", "runs_link/q.csv"}}, Error::Kind::invalid_argument);
  EXPECT_NO_THROW(check_outputs({}, {{"--junit", "j.xml"}, {"--csv", "runs_link/q.csv"}}));
}

// sub -> other/deep: sub/../j.xml is other/j.xml (the kernel walks ".." from the folder linked
// to), which the lexical path called ./j.xml: one alias missed, one distinct pair refused.
TEST_F(OutputPaths, DotDotAfterALinkedFolderLeavesTheFolderLinkedTo) {
  fs::create_directories("other/deep");
  fs::create_symlink(dir_ / "other" / "deep", "sub");
  const std::string what =
      message_of({}, {{"--junit", "other/j.xml"}, {"--csv", "sub/../j.xml"}}, Error::Kind::invalid_argument);
  EXPECT_NE(what.find("--csv 'sub/../j.xml' is the same file as --junit 'other/j.xml'"), std::string::npos) << what;
  EXPECT_NO_THROW(check_outputs({}, {{"--junit", "j.xml"}, {"--csv", "sub/../j.xml"}}));
  EXPECT_EQ(resolved_path({"--csv", "sub/../j.xml"}), fs::canonical(dir_) / "other" / "j.xml");
  // A folder not made yet, then "..": the sink makes the folder, so this is ./j.xml, which exists.
  std::ofstream("j.xml") << "rows";
  message_of({}, {{"--junit", "j.xml"}, {"--csv", "not_made_yet/../j.xml"}}, Error::Kind::invalid_argument);
}

TEST_F(OutputPaths, AHardLinkBetweenTwoOutputsIsOneFile) {
  std::ofstream("a.csv") << "old rows";
  fs::create_hard_link("a.csv", "b.prom");
  const std::string what = message_of({}, {{"--csv", "a.csv"}, {"--prom", "b.prom"}}, Error::Kind::invalid_argument);
  EXPECT_NE(what.find("--prom 'b.prom' is the same file as --csv 'a.csv'"), std::string::npos) << what;
}

// A chain of links ends where its last link points, however many hops, up to the kernel's bound.
TEST_F(OutputPaths, AChainOfLinksIsFollowedToItsEnd) {
  fs::create_directories("d");
  fs::create_symlink("d/l2", "l1");
  fs::create_symlink("../l3", "d/l2");  // relative to d/: ./l3
  fs::create_symlink("d", "l3_folder");
  fs::create_symlink("l3_folder/../target.prom", "l3");  // d/../target.prom: ./target.prom
  message_of({}, {{"--prom", "target.prom"}, {"--csv", "l1"}}, Error::Kind::invalid_argument);
  // 40 hops resolve (Linux's MAXSYMLINKS, which open(2) allows); the 41st is a loop's error.
  for (int i = 0; i < 41; ++i) fs::create_symlink("hop" + std::to_string(i + 1), "hop" + std::to_string(i));
  EXPECT_EQ(resolved_path({"--csv", "hop1"}), fs::canonical(dir_) / "hop41");
  EXPECT_THROW(resolved_path({"--csv", "hop0"}), Error);
}

// A loop of links is refused with one line, at once: no hang, no run.
TEST_F(OutputPaths, ALoopOfLinksIsRefusedWithOneLine) {
  fs::create_symlink("b.csv", "a.csv");
  fs::create_symlink("a.csv", "b.csv");
  fs::create_symlink("self", "self");
  for (const char* path : {"a.csv", "self", "self/x.csv"}) {
    const std::string what = message_of({}, {{"--csv", path}}, Error::Kind::invalid_argument);
    EXPECT_NE(what.find(std::string("cannot check --csv '") + path + "': " + std::strerror(ELOOP)), std::string::npos)
        << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  message_of({{"--profile", "a.csv"}}, {{"--csv", "out.csv"}}, Error::Kind::invalid_argument);  // an input's loop too
}

// An output linked to an input is the input, whether the link was made before the input existed
// or after, and wherever the link points from.
TEST_F(OutputPaths, AnOutputLinkedToAnInputIsRefused) {
  fs::create_symlink("profiles/acceptance.toml", "results.csv");  // dangling when made
  fs::create_directories("profiles");
  std::ofstream("profiles/acceptance.toml") << "[run]\n";
  const std::string what = message_of({{"--profile", "profiles/acceptance.toml"}}, {{"--csv", "results.csv"}},
                                      Error::Kind::invalid_argument);
  EXPECT_NE(what.find("is the same file as --profile 'profiles/acceptance.toml': refusing to overwrite an input"),
            std::string::npos) << what;
  std::ifstream in("profiles/acceptance.toml");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "[run]\n");
}

// Links that lead to distinct files are distinct outputs, dangling or not.
TEST_F(OutputPaths, LinksToDistinctFilesAreAccepted) {
  fs::create_directories("s4");
  fs::create_symlink("s4/j.xml", "j_link");
  fs::create_symlink("../s4/q.csv", "s4/q_link");
  fs::create_symlink(".", "here");
  EXPECT_NO_THROW(check_outputs({{"--profile", "here/profile.toml"}},
                                {{"--junit", "j_link"}, {"--csv", "s4/q_link"}, {"--prom", "here/s4/p.prom"}}));
  EXPECT_EQ(resolved_path({"--prom", "here/here/./s4/p.prom"}), fs::canonical(dir_) / "s4" / "p.prom");
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

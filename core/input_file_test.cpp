// Tests of InputFile and read_input_file (core/input_file.h): devices and folders refused before
// they are read, bytes and lines bounded, a FIFO without a writer timed out, a pipe's short
// writes joined.
#include "core/input_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "core/error.h"

namespace dts {
namespace {

namespace fs = std::filesystem;

class InputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("dts_input_file_test_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  static Error error_of(const std::string& path, InputLimits limits) {
    try {
      read_input_file(path, "test input", limits);
    } catch (const Error& e) {
      return e;
    }
    ADD_FAILURE() << "no error reading " << path;
    return Error(Error::Kind::backend, "none");
  }
  fs::path dir_;
};

TEST_F(InputFileTest, ReadsARegularFileWhole) {
  const std::string text = "a,b\n" + std::string(200000, 'x') + "\nlast";  // several 64 KiB chunks
  EXPECT_EQ(read_input_file(write("in.csv", text), "test input", {}), text);
  InputFile in(write("torn.csv", "a\nb"), "test input", {});
  char buffer[16];
  EXPECT_EQ(in.read(buffer, sizeof buffer), 3u);
  EXPECT_EQ(in.read(buffer, sizeof buffer), 0u);
  EXPECT_FALSE(in.ended_with_newline());  // "b" has no '\n': the last line was cut short
  InputFile empty(write("empty.csv", ""), "test input", {});
  EXPECT_EQ(empty.read(buffer, sizeof buffer), 0u);
  EXPECT_TRUE(empty.ended_with_newline());
}

// /dev/zero would never end; a folder reads as nothing. Both are refused by their kind, before a
// byte is read.
TEST_F(InputFileTest, DevicesAndFoldersAreRefusedBeforeReading) {
  Error e = error_of("/dev/zero", {});
  EXPECT_EQ(e.kind(), Error::Kind::io);
  EXPECT_NE(std::string(e.what()).find("test input '/dev/zero': it is a character device"), std::string::npos) << e.what();
  e = error_of(dir_.string(), {});
  EXPECT_NE(std::string(e.what()).find("it is a directory"), std::string::npos) << e.what();
  e = error_of((dir_ / "missing.csv").string(), {});
  EXPECT_NE(std::string(e.what()).find(std::strerror(ENOENT)), std::string::npos) << e.what();
}

TEST_F(InputFileTest, ALineOrFilePastItsLimitIsRefusedNamingLineAndLimit) {
  // Lines of 10 bytes pass a limit of 10; the 11-byte third line does not.
  const std::string path = write("lines.csv", "0123456789\n0123456789\n0123456789a\nshort\n");
  Error e = error_of(path, {.max_line = 10});
  EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
  EXPECT_NE(std::string(e.what()).find(path + ":3: line longer than 10 bytes"), std::string::npos) << e.what();
  EXPECT_NO_THROW(read_input_file(path, "test input", {.max_line = 11}));
  // 40 bytes in all: a limit of 39 refuses the file, 40 takes it.
  e = error_of(path, {.max_bytes = 39});
  EXPECT_NE(std::string(e.what()).find("longer than 39 bytes"), std::string::npos) << e.what();
  EXPECT_NO_THROW(read_input_file(path, "test input", {.max_bytes = 40}));
}

// A FIFO nobody writes: a plain read would wait forever (and, opened without O_NONBLOCK, so
// would the open). Here it ends with Error{timeout} after the wait asked for.
TEST_F(InputFileTest, AFifoWithoutAWriterTimesOut) {
  const std::string path = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
  const auto start = std::chrono::steady_clock::now();
  const Error e = error_of(path, {.timeout_seconds = 0.3});
  EXPECT_EQ(e.kind(), Error::Kind::timeout) << e.what();
  EXPECT_NE(std::string(e.what()).find("no bytes came for 0.3 s"), std::string::npos) << e.what();
  // Not an instant "empty file": the wait really happened (a lower bound only; no upper one).
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(300));
}

// A writer that writes in pieces with pauses between them: every piece is read, in order, once.
TEST_F(InputFileTest, AFifosPiecesAreJoined) {
  const std::string path = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
  std::thread writer([&] {
    const int fd = ::open(path.c_str(), O_WRONLY);
    for (const char* piece : {"header\n", "row 1\n", "row 2\n"}) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      [[maybe_unused]] const ssize_t n = ::write(fd, piece, std::strlen(piece));
    }
    ::close(fd);
  });
  const std::string text = read_input_file(path, "test input", {.timeout_seconds = 60});
  writer.join();
  EXPECT_EQ(text, "header\nrow 1\nrow 2\n");
}

// `--data <(zcat x.gz)`: the shell's /dev/fd/N names a pipe.
TEST_F(InputFileTest, APipeNamedByDevFdReads) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::write(fds[1], "abc\n", 4), 4);
  ::close(fds[1]);
  EXPECT_EQ(read_input_file("/dev/fd/" + std::to_string(fds[0]), "test input", {.timeout_seconds = 60}), "abc\n");
  ::close(fds[0]);
}

// "-": standard input, as mpirun hands its own to rank 0 (`zcat x.gz | mpirun ... --data -`).
TEST_F(InputFileTest, DashIsStandardInput) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::write(fds[1], "from stdin\n", 11), 11);
  ::close(fds[1]);
  const int saved = ::dup(STDIN_FILENO);
  ::dup2(fds[0], STDIN_FILENO);
  ::close(fds[0]);
  std::string text;
  EXPECT_NO_THROW(text = read_input_file("-", "test input", {.timeout_seconds = 60}));
  ::dup2(saved, STDIN_FILENO);
  ::close(saved);
  EXPECT_EQ(text, "from stdin\n");
}

}  // namespace
}  // namespace dts

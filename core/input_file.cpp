// InputFile: stat(2) before open(2) to refuse what must not be opened, O_NONBLOCK so that opening
// a FIFO without a writer returns at once, then poll(2) with the timeout before every read of a
// FIFO or pipe (a FIFO without a writer reads as its end, so it is polled, never read, until a
// writer has written or gone).
#include "core/input_file.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace dts {

namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file, FIFO or pipe";
}

bool readable_kind(mode_t mode) { return S_ISREG(mode) || S_ISFIFO(mode); }

std::string format_seconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

}  // namespace

InputBounds::InputBounds(std::string path, std::string what, InputLimits limits)
    : path_(std::move(path)), what_(std::move(what)), limits_(limits) {}

InputFile::InputFile(std::string path_text, std::string what, InputLimits limits)
    : bounds_(std::move(path_text), std::move(what), limits) {
  const std::string& path = bounds_.path();
  const std::string named = bounds_.what() + " '" + path + "'";
  if (path == "-") {
    // Standard input (mpirun hands its own to rank 0): already open, so only its kind is checked.
    struct stat info {};
    if (::fstat(STDIN_FILENO, &info) != 0 || !readable_kind(info.st_mode)) {
      throw Error(Error::Kind::io, "cannot read " + bounds_.what() + " from standard input: it is " +
                                       (::isatty(STDIN_FILENO) ? "a terminal" : kind_of(info.st_mode)) +
                                       "; pipe or redirect the file into it");
    }
    fd_ = ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0);
    if (fd_ < 0) throw Error(Error::Kind::io, "cannot read " + named + ": " + std::strerror(errno));
    pipe_ = S_ISFIFO(info.st_mode);  // polled before each read; left blocking (its flags are shared)
    return;
  }
  struct stat before {};
  if (::stat(path.c_str(), &before) != 0) {
    throw Error(Error::Kind::io, "cannot read " + named + ": " + std::strerror(errno));
  }
  if (!readable_kind(before.st_mode)) {
    throw Error(Error::Kind::io, "cannot read " + named + ": it is " + kind_of(before.st_mode) +
                                     ", not a file (refused before reading)");
  }
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) throw Error(Error::Kind::io, "cannot read " + named + ": " + std::strerror(errno));
  struct stat after {};
  if (::fstat(fd_, &after) != 0 || !readable_kind(after.st_mode)) {
    const mode_t mode = after.st_mode;
    ::close(fd_);
    fd_ = -1;
    throw Error(Error::Kind::io, "cannot read " + named + ": it is " + kind_of(mode) + ", not a file");
  }
  pipe_ = S_ISFIFO(after.st_mode);
  if (!pipe_) ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);  // a regular file never waits
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

size_t InputFile::read(char* buffer, size_t size) {
  size_t filled = 0;
  while (filled < size && !at_end_) {
    const size_t got = read_some(buffer + filled, size - filled);
    if (got == 0) {
      at_end_ = true;
      break;
    }
    bounds_.account(buffer + filled, got);
    filled += got;
  }
  return filled;
}

size_t InputFile::read_some(char* buffer, size_t size) {
  using Clock = std::chrono::steady_clock;
  const double timeout = bounds_.limits().timeout_seconds;
  const bool bounded = timeout > 0;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(bounded ? timeout : 0));
  const std::string& what = bounds_.what();
  const std::string& path = bounds_.path();
  for (;;) {
    if (pipe_) {
      // A FIFO whose writer has not yet opened it polls as nothing at all (not as its end); one
      // whose writer wrote or closed polls readable.
      int wait_ms = -1;
      if (bounded) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) {
          throw Error(Error::Kind::timeout, "cannot read " + what + " '" + path + "': no bytes came for " +
                                                format_seconds(timeout) +
                                                " s (a FIFO or pipe without a writer; -T sets the wait)");
        }
        wait_ms = static_cast<int>(std::min<long long>(left, 1000));
      }
      pollfd p{fd_, POLLIN, 0};
      const int ready = ::poll(&p, 1, wait_ms);
      if (ready < 0 && errno != EINTR) {
        throw Error(Error::Kind::io, "cannot read " + what + " '" + path + "': " + std::strerror(errno));
      }
      if (ready <= 0) continue;
    }
    const ssize_t got = ::read(fd_, buffer, size);
    if (got >= 0) return static_cast<size_t>(got);
    if (errno == EINTR || errno == EAGAIN) continue;
    throw Error(Error::Kind::io, "cannot read " + what + " '" + path + "': " + std::strerror(errno));
  }
}

void InputBounds::account(const char* bytes, size_t count) {
  if (count == 0) return;
  bytes_ += static_cast<int64_t>(count);
  if (limits_.max_bytes > 0 && bytes_ > limits_.max_bytes) {
    throw Error(Error::Kind::invalid_argument, path_ + ": longer than " + std::to_string(limits_.max_bytes) +
                                                   " bytes, the most a " + what_ + " may hold");
  }
  const char* at = bytes;
  const char* end = bytes + count;
  while (at < end) {
    const char* newline = static_cast<const char*>(std::memchr(at, '\n', static_cast<size_t>(end - at)));
    line_length_ += (newline ? newline : end) - at;
    if (limits_.max_line > 0 && line_length_ > limits_.max_line) {
      throw Error(Error::Kind::invalid_argument,
                  path_ + ":" + std::to_string(newlines_ + 1) + ": line longer than " +
                      std::to_string(limits_.max_line) + " bytes, the most a line of a " + what_ +
                      " holds (is this the right file?)");
    }
    if (!newline) break;
    ++newlines_;
    line_length_ = 0;
    at = newline + 1;
  }
  last_byte_ = end[-1];
}

std::string read_input_file(const std::string& path, const std::string& what, InputLimits limits) {
  InputFile in(path, what, limits);
  std::string text;
  char chunk[1 << 16];
  for (;;) {
    const size_t got = in.read(chunk, sizeof chunk);
    text.append(chunk, got);
    if (got < sizeof chunk) break;
  }
  return text;
}

}  // namespace dts

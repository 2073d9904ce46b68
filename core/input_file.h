// Reading a file a user named (results CSVs, data sets, profiles): its kind is checked before
// anything is read (a regular file, a FIFO or a pipe; never a device, socket or directory), and
// every read is bounded in bytes, in line length and in time, so that no input can exhaust the
// memory of the node or leave the reader waiting forever. Sits in core/: every layer reads input.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace dts {

struct InputLimits {
  // Bytes the whole input may hold; 0: unbounded (a reader that streams, such as the results CSV
  // reader, bounds its memory by the line instead).
  int64_t max_bytes = 0;
  // Bytes one line may hold, its '\n' excluded; 0: unbounded. Set to the longest valid line of
  // the format, so a file of another kind (a binary, /dev/zero's bytes in a regular file) is
  // refused at its first over-long line instead of being buffered whole.
  int64_t max_line = 0;
  // Seconds to wait for the next bytes of a FIFO or pipe (a writer that never writes); 0: no
  // limit. A regular file never waits.
  double timeout_seconds = 0;
};

// The bounds of InputLimits (bytes, line length) applied to bytes as they pass, for a reader of
// text that is already in memory; InputFile applies them to what it reads.
class InputBounds {
 public:
  InputBounds(std::string path, std::string what, InputLimits limits);
  // Throws Error{invalid_argument} "PATH:LINE: line longer than N bytes ..." or "PATH: longer
  // than N bytes ..." at the first byte past a bound.
  void account(const char* bytes, size_t count);
  // Whether the last byte so far is a '\n' (true before any byte).
  bool ends_with_newline() const { return last_byte_ == '\n'; }
  const std::string& path() const { return path_; }
  const std::string& what() const { return what_; }
  const InputLimits& limits() const { return limits_; }

 private:
  std::string path_, what_;
  InputLimits limits_;
  int64_t bytes_ = 0, newlines_ = 0, line_length_ = 0;
  char last_byte_ = '\n';
};

// An open input. Errors name the path and the OS's reason:
//   Error{io}               cannot open or read; a directory, device or socket (refused by stat(2)
//                           before it is opened: opening some devices does something)
//   Error{invalid_argument} "PATH:LINE: line longer than N bytes ...", "PATH: longer than N bytes ..."
//   Error{timeout}          a FIFO or pipe that gave no bytes for timeout_seconds
class InputFile {
 public:
  // `what` names the input in messages ("results CSV", "--data file", "profile"). The path "-"
  // is standard input (a pipe or a file redirected into it; a terminal is refused).
  InputFile(std::string path, std::string what, InputLimits limits);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // Fills `buffer` with up to `size` bytes, fewer only at the end of the input (0 there): a FIFO's
  // short reads are joined, as readers that take a short read for the end expect.
  size_t read(char* buffer, size_t size);

  const std::string& path() const { return bounds_.path(); }
  // True once the input's last byte was read and it was a '\n' (or the input is empty): a file
  // whose last line lacks one was cut short, or written by a tool that omits it.
  bool ended_with_newline() const { return at_end_ && bounds_.ends_with_newline(); }
  bool at_end() const { return at_end_; }

 private:
  size_t read_some(char* buffer, size_t size);

  InputBounds bounds_;
  int fd_ = -1;
  bool pipe_ = false;
  bool at_end_ = false;
};

// The whole input as a string (errors as InputFile's).
std::string read_input_file(const std::string& path, const std::string& what, InputLimits limits);

}  // namespace dts

// A trace file's bytes as an importer reads them: through InputFile (devices refused, a FIFO's wait
// bounded), inflated as they pass when the file starts with gzip's magic (1f 8b; PyTorch's tools
// write .json.gz, Chakra's .et.gz), concatenated gzip members read as one stream. Memory: two
// buffers of 64 KiB, whatever the file's size.
#pragma once
#include <zlib.h>

#include <cstddef>
#include <string>
#include <vector>

#include "core/input_file.h"

namespace dts::trace {

class ByteSource {
 public:
  // `what` names the file in messages ("Kineto trace").
  ByteSource(const std::string& path, const char* what, double timeout_seconds);
  ~ByteSource();
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  // Up to `size` bytes (size > 0) into `out`: 0 only at the end of the file. A gzip stream cut
  // short or corrupt is Error{invalid_argument}, one line naming the file.
  size_t read(char* out, size_t size);
  bool gzip() const { return gzip_; }

 private:
  std::string path_;
  InputFile file_;
  std::vector<char> raw_;
  size_t raw_at_ = 0, raw_end_ = 0;  // plain files: the bytes read to look for the magic, handed out first
  bool gzip_ = false, ended_ = false;
  z_stream z_{};
};

}  // namespace dts::trace

// The importers' byte source (trace/byte_source.h).
#include "trace/byte_source.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/error.h"

namespace dts::trace {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw Error(Error::Kind::invalid_argument, quoted_input(path) + ": " + why);
}

}  // namespace

ByteSource::ByteSource(const std::string& path, const char* what, double timeout_seconds)
    : path_(path), file_(path, what, InputLimits{0, 0, timeout_seconds}), raw_(1 << 16) {
  raw_end_ = file_.read(raw_.data(), raw_.size());
  gzip_ = raw_end_ >= 2 && static_cast<uint8_t>(raw_[0]) == 0x1f && static_cast<uint8_t>(raw_[1]) == 0x8b;
  if (!gzip_) return;
  if (inflateInit2(&z_, 15 + 32) != Z_OK) throw Error(Error::Kind::io, quoted_input(path) + ": zlib cannot start");
  z_.next_in = reinterpret_cast<Bytef*>(raw_.data());
  z_.avail_in = static_cast<uInt>(raw_end_);
}

ByteSource::~ByteSource() {
  if (gzip_) inflateEnd(&z_);
}

size_t ByteSource::read(char* out, size_t size) {
  if (!gzip_) {
    if (raw_at_ == raw_end_) return file_.read(out, size);
    const size_t n = std::min(size, raw_end_ - raw_at_);
    std::memcpy(out, raw_.data() + raw_at_, n);
    raw_at_ += n;
    return n;
  }
  z_.next_out = reinterpret_cast<Bytef*>(out);
  z_.avail_out = static_cast<uInt>(size);
  for (;;) {
    if (z_.avail_in == 0 && !file_.at_end()) {
      raw_end_ = file_.read(raw_.data(), raw_.size());
      z_.next_in = reinterpret_cast<Bytef*>(raw_.data());
      z_.avail_in = static_cast<uInt>(raw_end_);
    }
    if (ended_) {
      if (z_.avail_in == 0) return 0;
      inflateReset(&z_);  // another gzip member follows: concatenated gzip files are one stream
      ended_ = false;
    }
    const int rc = inflate(&z_, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) {
      ended_ = true;
    } else if (rc == Z_BUF_ERROR && z_.avail_in == 0 && file_.at_end()) {
      fail(path_, "truncated gzip stream (the file ends inside its compressed data)");
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      fail(path_, std::string("corrupt gzip data (zlib: ") + (z_.msg ? z_.msg : "error " + std::to_string(rc)) + ")");
    }
    if (const size_t made = size - z_.avail_out; made > 0) return made;
  }
}

}  // namespace dts::trace

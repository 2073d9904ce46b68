// A full disk for one test, without mounting one: RLIMIT_FSIZE caps how large this process may
// make any file, and a write past the cap fails with EFBIG (SIGXFSZ, which would end the process,
// ignored meanwhile), as a write to a full file system fails with ENOSPC. Restored on scope exit.
#pragma once
#include <sys/resource.h>

#include <csignal>

namespace dts::testing {

class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    previous_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    ::getrlimit(RLIMIT_FSIZE, &previous_);
    rlimit limited = previous_;
    limited.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &limited);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &previous_);
    std::signal(SIGXFSZ, previous_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit previous_{};
  void (*previous_handler_)(int) = SIG_DFL;
};

}  // namespace dts::testing

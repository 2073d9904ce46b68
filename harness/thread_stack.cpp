// Worker threads of libraries dtsuite links get a stack that fits them. civetweb (the web server
// under prometheus-cpp's Exposer, --metrics-port) starts its workers with 100 KiB stacks, and
// glibc carves every thread's static TLS out of its stack: OpenBLAS alone has 60 KiB of TLS, so a
// scrape of /metrics overflowed the worker's stack (SIGSEGV in mg_printf). This definition, in
// the dtsuite executable and exported to shared libraries, comes before libc's and raises any
// request below kMinimumThreadStack; larger requests pass through unchanged.
#include <dlfcn.h>
#include <pthread.h>

#include <cstddef>

namespace {
constexpr size_t kMinimumThreadStack = size_t{1} << 20;  // 1 MiB: TLS plus civetweb's own 100 KiB, with room

using SetStackSize = int (*)(pthread_attr_t*, size_t);
}  // namespace

extern "C" int pthread_attr_setstacksize(pthread_attr_t* attr, size_t size) {
  static const auto next = reinterpret_cast<SetStackSize>(dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  if (next == nullptr) return 0;  // keep the default stack (glibc's, from RLIMIT_STACK): never smaller
  return next(attr, size < kMinimumThreadStack ? kMinimumThreadStack : size);
}

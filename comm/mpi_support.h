// What the backends that talk to MPI share (mpi itself, and nccl and gloo, which bootstrap over
// it): an MPI return code as dtsuite's error, with the library's own text.
#pragma once

#include <mpi.h>

#include <source_location>
#include <string>
#include <string_view>

#include "core/error.h"

namespace dts {

// Throws Error{backend} "WHAT failed: <MPI's error string>" unless `rc` is MPI_SUCCESS.
inline void check_mpi(int rc, std::string_view what, std::source_location where = std::source_location::current()) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw Error(Error::Kind::backend,
              std::string(what) + " failed: " + std::string(text, static_cast<size_t>(length > 0 ? length : 0)), where);
}

}  // namespace dts

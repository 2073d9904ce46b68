// Moving a short text (an error message, a first wrong element) from one rank to rank 0 over a
// communicator, for reports that rank 0 writes.
#pragma once
#include <string>

#include "comm/communicator.h"

namespace dts {

// Collective over `comm`: every rank calls it with the same `from`. Returns `text` of rank `from`
// on rank 0, an empty string elsewhere.
std::string text_to_root(Communicator& comm, int from, const std::string& text);

}  // namespace dts

// Moving a short text (an error message, a first wrong element) from one rank to rank 0 over a
// communicator, for reports that rank 0 writes, and agreeing on a status with the first message.
#pragma once
#include <exception>
#include <string>
#include <utility>

#include "comm/communicator.h"

namespace dts {

// Collective over `comm`: every rank calls it with the same `from`. Returns `text` of rank `from`
// on rank 0, an empty string elsewhere.
std::string text_to_root(Communicator& comm, int from, const std::string& text);

// Agrees on a status across the ranks of `comm` (collective): returns the largest status and, on
// rank 0, the message of the lowest rank that reported it ("rank N: ..." when N is not 0).
std::pair<int, std::string> agree(Communicator& comm, int status, const std::string& message);

// Makes every rank of `comm` leave together when any of them failed (collective): the rank that
// failed rethrows its error, the others throw one of the same kind (so an unsupported case is a
// SKIP on every rank), and rank 0's carries the first failing rank's message, which is the one
// the harness reports. Nothing happens when no rank failed.
void leave_together(Communicator& comm, const std::exception_ptr& failure);

}  // namespace dts

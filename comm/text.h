// Moving a short text (an error message, a first wrong element) from one rank to rank 0 over a
// communicator, for reports that rank 0 writes, and agreeing on a status with the first message.
#pragma once
#include <exception>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"

namespace dts {

// Collective over `comm`: every rank calls it with the same `from`. Returns `text` of rank `from`
// on rank 0, an empty string elsewhere.
std::string text_to_root(Communicator& comm, int from, const std::string& text);

// Collective over `comm`: every rank's short text, indexed by rank, on every rank, in one
// all_gather of fixed slots of max_bytes + 1 (a text is cut at max_bytes or at its first NUL).
std::vector<std::string> all_gather_texts(Communicator& comm, const std::string& text, size_t max_bytes);

// Agrees on a status across the ranks of `comm` (collective): returns the largest status and, on
// rank 0, the message of the lowest rank that reported it ("rank N: ..." when N is not 0).
std::pair<int, std::string> agree(Communicator& comm, int status, const std::string& message);

// Makes every rank of `comm` leave together when any of them failed (collective): the rank that
// failed rethrows its error, the others throw one of the same kind (so an unsupported case is a
// SKIP on every rank), and rank 0's carries the first failing rank's message, which is the one
// the harness reports. Nothing happens when no rank failed.
void leave_together(Communicator& comm, const std::exception_ptr& failure);

// The harness's listener for a failure that a rank is about to agree on (leave_together calls it
// before its agreement): while the failed rank waits there, peers that wait inside a call it will
// never make cannot agree, and the harness's watchdog must hear of the failure to end the case.
// Process-wide; an empty function removes it.
using FailureListener = std::function<void(const std::exception_ptr&)>;
void set_failure_listener(FailureListener listener);
void notify_failure(const std::exception_ptr& failure);  // calls the listener, if any

}  // namespace dts

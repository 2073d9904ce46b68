// A rank that dies of a signal (SIGSEGV, SIGFPE, SIGBUS, SIGILL, SIGABRT: a library that crashed
// inside a call, as Gloo does with SIGFPE on some inputs) says so before it goes: one line on its
// stderr naming its rank, its node, the signal, the backend and the running case. The process then
// ends as it would have (the signal's default action: a core, exit 128 + N under a shell), and the
// launcher ends the other ranks; rank 0's SIGTERM path (runner.cpp) writes the case's FAIL row
// naming the rank that stopped answering. A signal handler can format nothing, lock nothing and
// allocate nothing, so the line is prepared whenever the case changes (set_case), and the handler
// writes the prepared bytes alone.
#pragma once

#include <string>

namespace dts {

// Installs the handlers (once per process; later calls only update the rank, node and backend).
// Left out of sanitizer builds, whose own handlers report a fault with its stack.
void install_fatal_signal_report(int rank, const std::string& node, const std::string& backend);
// The case now running ("" between cases); updates the prepared line.
void set_fatal_signal_case(const std::string& case_id);
// The prepared line for `signal` as the handler would write it (for tests).
std::string fatal_signal_line(int signal);

}  // namespace dts

#include "harness/fatal_signal.h"

#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>

namespace dts {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(undefined_behavior_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

constexpr std::array<int, 5> kSignals = {SIGSEGV, SIGFPE, SIGBUS, SIGILL, SIGABRT};
const char* signal_name(int signal) {
  switch (signal) {
    case SIGSEGV: return "SIGSEGV (invalid memory access)";
    case SIGFPE: return "SIGFPE (arithmetic fault, e.g. an integer division by zero)";
    case SIGBUS: return "SIGBUS (bus error)";
    case SIGILL: return "SIGILL (illegal instruction)";
    case SIGABRT: return "SIGABRT (abort: a failed assertion or an uncaught exception)";
  }
  return "a fatal signal";
}

// Two prepared texts, the handler reading the one `g_current` names: set_case writes the other and
// then flips, so the handler never reads a half-written text. The text is the line with "%S" where
// the signal's name goes.
constexpr size_t kLine = 1024;
std::array<std::array<char, kLine>, 2> g_text{};
std::atomic<int> g_current{0};
std::mutex g_mutex;  // set_case callers, not the handler
std::string g_who, g_backend, g_case;
struct sigaction g_previous[kSignals.size()]{};

std::string compose(const std::string& who, const std::string& backend, const std::string& case_id) {
  return "dtsuite: " + who + " died of %S over the " + backend + " backend " +
         (case_id.empty() ? std::string("between cases") : "during case " + case_id) +
         "; the job ends here (a process that died cannot go on to the next case within the MPI job): the launcher "
         "ends the other ranks, and rank 0 writes the case's FAIL row naming this rank; rows written so far are "
         "kept\n";
}

void prepare() {  // with g_mutex held
  const std::string text = compose(g_who, g_backend, g_case);
  const int next = 1 - g_current.load();
  std::snprintf(g_text[static_cast<size_t>(next)].data(), kLine, "%s", text.c_str());
  if (text.size() >= kLine) std::memcpy(g_text[static_cast<size_t>(next)].data() + kLine - 5, "...\n", 5);
  g_current.store(next);
}

void write_all(const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, p, n);
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void on_fatal(int signal) {
  const char* text = g_text[static_cast<size_t>(g_current.load())].data();
  const char* mark = std::strstr(text, "%S");  // async-signal-safe in glibc: no locale, no allocation
  if (mark != nullptr) {
    write_all(text, static_cast<size_t>(mark - text));
    const char* name = signal_name(signal);
    write_all(name, std::strlen(name));
    write_all(mark + 2, std::strlen(mark + 2));
  }
  // The previous action back (the default, or a handler installed before this one), then the
  // signal again: a fault re-faults on return, a raised signal is delivered once this returns.
  for (size_t i = 0; i < kSignals.size(); ++i) {
    if (kSignals[i] == signal) ::sigaction(signal, &g_previous[i], nullptr);
  }
  ::raise(signal);
}

}  // namespace

void install_fatal_signal_report(int rank, const std::string& node, const std::string& backend) {
  std::lock_guard lock(g_mutex);
  g_who = "rank " + std::to_string(rank) + (node.empty() ? "" : " (node " + node + ")");
  g_backend = backend;
  prepare();
  static bool installed = false;
  if (installed || kSanitized) return;
  installed = true;
  for (size_t i = 0; i < kSignals.size(); ++i) {
    struct sigaction action {};
    action.sa_handler = on_fatal;
    action.sa_flags = SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    ::sigaction(kSignals[i], &action, &g_previous[i]);
  }
}

void set_fatal_signal_case(const std::string& case_id) {
  std::lock_guard lock(g_mutex);
  g_case = case_id;
  prepare();
}

std::string fatal_signal_line(int signal) {
  std::lock_guard lock(g_mutex);
  std::string text = compose(g_who, g_backend, g_case);
  const size_t mark = text.find("%S");
  if (mark != std::string::npos) text.replace(mark, 2, signal_name(signal));
  return text;
}

}  // namespace dts

// Progress of the case loop, for outputs that follow a run while it goes (--metrics-port, the
// --prom textfile): the runner calls these hooks on rank 0 at the begin and end of every case.
// Kept apart so runner.cpp knows nothing of Prometheus; empty hooks do nothing.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "harness/cli.h"
#include "harness/stack_info.h"
#include "results/record.h"

namespace dts {

struct CaseProgress {
  std::function<void(size_t index, std::string_view suite, const std::string& case_id)> on_begin;
  std::function<void(size_t index)> on_end;

  void begin(size_t index, std::string_view suite, const std::string& case_id) const {
    if (on_begin) on_begin(index, suite, case_id);
  }
  void end(size_t index) const {
    if (on_end) on_end(index);
  }
};

// The sink for --prom, --push and --metrics-port (nullptr when none is asked for), with
// `progress` pointed at it. Rank 0 only. Throws dts::Error with one line when the port cannot be
// served, the gateway does not answer or the textfile cannot be written (exit 2 at set-up).
std::unique_ptr<Sink> make_prometheus_sink(const Command& cmd, const StackInfo& stack, const std::string& run_id,
                                           size_t planned_cases, CaseProgress& progress);

}  // namespace dts

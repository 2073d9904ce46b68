// Wires the Prometheus sink (results/prometheus_sink.h) to the harness: its run info from the
// stack and the command line, and the case-loop hooks. The sink is shared between the fan-out
// (which destroys its sinks at close) and the hooks, so a hook never sees a dead sink.
#include "harness/progress.h"

#include <utility>

#include "dts/config.h"
#include "results/prometheus_sink.h"

namespace dts {

namespace {

// Results owns its sinks; this one forwards to a sink the hooks hold too.
class SharedSink final : public Sink {
 public:
  explicit SharedSink(std::shared_ptr<PrometheusSink> sink) : sink_(std::move(sink)) {}
  void write(const Record& record) override { sink_->write(record); }
  void close() override { sink_->close(); }

 private:
  std::shared_ptr<PrometheusSink> sink_;
};

}  // namespace

std::unique_ptr<Sink> make_prometheus_sink(const Command& cmd, const StackInfo& stack, const std::string& run_id,
                                           size_t planned_cases, CaseProgress& progress) {
  if (cmd.prom_path.empty() && cmd.push_url.empty() && cmd.metrics_port == 0) return nullptr;
  PrometheusRunInfo run;
  run.run_id = run_id;
  run.version = DTS_VERSION;
  run.backend = stack.backend;
  run.backend_version = stack.backend_version;
  run.mpi_version = stack.mpi_version;
  run.device = stack.device;
  run.host = stack.host;
  run.world_size = stack.world_size;
  run.nodes = stack.nodes;
  run.planned_cases = planned_cases;
  PrometheusOutputs outputs;
  outputs.textfile_path = cmd.prom_path;
  outputs.push_url = cmd.push_url;
  outputs.metrics_port = cmd.metrics_port;
  outputs.bind_address = cmd.metrics_address;
  auto sink = std::make_shared<PrometheusSink>(std::move(run), std::move(outputs));
  progress.on_begin = [sink](size_t index, std::string_view suite, const std::string& case_id) {
    sink->case_started(index, suite, case_id);
  };
  progress.on_end = [sink](size_t index) { sink->case_finished(index); };
  return std::make_unique<SharedSink>(std::move(sink));
}

}  // namespace dts

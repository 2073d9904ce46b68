// PrometheusSink: Records as Prometheus metrics (prometheus-cpp), for the three outputs of
// `dtsuite run`: a textfile for node_exporter (--prom), a Pushgateway push (--push) and a live
// /metrics endpoint on rank 0 (--metrics-port). Families, labels and units: results/SCHEMA.md.
#pragma once
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "results/record.h"

namespace prometheus {
class Exposer;
class Gateway;
class Registry;
template <typename T>
class Family;
class Gauge;
}  // namespace prometheus

namespace dts {

// "dtsuite_" + metric + "_" + unit, in Prometheus' alphabet; the unit is left out when the metric
// already ends with it (max_ulp, ulp -> dtsuite_max_ulp) or there is none (check -> dtsuite_check).
std::string prometheus_metric_name(std::string_view metric, std::string_view unit);
// The family that carries a record's threshold: dtsuite_<metric>_threshold[_<unit>].
std::string prometheus_threshold_name(std::string_view metric, std::string_view unit);

// The labels a record's series carries, in a fixed order, empty values left out (Prometheus
// treats an empty label as an absent one). See SCHEMA.md for why these and no others.
std::vector<std::pair<std::string, std::string>> prometheus_labels(const Record& record);

// The keys of `config` (key=value;...) that become labels: the axes along which the cases of one
// run differ, so that no two records of a run share a series.
const std::vector<std::string>& prometheus_config_label_keys();

// Where a Pushgateway is: "http://HOST:PORT[/PATH]" (scheme http or https, default http; port
// default 80/443). Throws Error{invalid_argument} with one line on anything else.
struct PushTarget {
  std::string scheme, host, port, path;
};
PushTarget parse_push_url(const std::string& url);
// One grouping-key path segment pair as the Pushgateway reads it: "name", "value" as they are
// when the value is URL-safe and not empty, else "name@base64", base64url(value).
std::pair<std::string, std::string> grouping_key_segment(const std::string& name, const std::string& value);

// What the sink says about the run itself: dtsuite_build_info and the progress gauges.
struct PrometheusRunInfo {
  std::string run_id, version, backend, backend_version, mpi_version, device, host;
  int world_size = 0, nodes = 0;
  size_t planned_cases = 0;
};

struct PrometheusOutputs {
  std::string textfile_path;  // --prom; empty: none
  std::string push_url;       // --push; empty: none
  int metrics_port = 0;       // --metrics-port; 0: none
  // Where /metrics listens: loopback unless asked (--metrics-address), since the endpoint has no
  // authentication. An IPv6 address may be given with or without its brackets.
  std::string bind_address = "127.0.0.1";
  // How often, at most, the textfile is rewritten at the end of a case (and always at close()).
  std::chrono::milliseconds textfile_refresh{1000};
  std::chrono::milliseconds push_timeout{30000};  // a gateway that never answers must not hang the run
};

// How /metrics holds up against slow or idle clients: civetweb serves one connection per worker
// thread and a worker waits for a request (and for the client to take the answer) at most
// kMetricsRequestTimeout, so n idle connections delay a fresh scrape by at most
// ceil(n / kMetricsThreads) * kMetricsRequestTimeout, and never the run (the workers are not its threads).
inline constexpr int kMetricsThreads = 16;
inline constexpr std::chrono::milliseconds kMetricsRequestTimeout{2000};

// The civetweb "listening_ports" value for an address and port: IPv6 addresses in brackets.
std::string metrics_listening_port(const std::string& address, int port);

class MetricsCollectable;

// Thread-safe: write() runs under the harness's fan-out lock (and from the watchdog thread on a
// timeout), the progress calls on rank 0's main thread, and the /metrics server on its own
// threads. Progress calls after close() do nothing.
class PrometheusSink : public Sink {
 public:
  // Sets everything up and proves it works: binds the port, pushes the run's first state (build
  // info, planned cases) to the gateway and writes the first textfile. Throws Error (io or
  // invalid_argument) with one line naming what failed.
  PrometheusSink(PrometheusRunInfo run, PrometheusOutputs outputs);
  ~PrometheusSink() override;
  PrometheusSink(const PrometheusSink&) = delete;
  PrometheusSink& operator=(const PrometheusSink&) = delete;

  void write(const Record& record) override;
  // Writes the textfile and pushes to the gateway; a failure of either is thrown (Error{io},
  // both reasons in one line) after the other one was still attempted.
  void close() override;

  // Progress of the case loop (rank 0). A textfile refresh failing here is kept and reported by
  // close(): the case loop must not see output errors.
  void case_started(size_t index, std::string_view suite, std::string_view case_id);
  void case_finished(size_t index);

  // Everything the sink exports now, in the text exposition format.
  std::string exposition() const;
  // The port /metrics listens on (0: not serving).
  int metrics_port() const;

 private:
  void write_textfile_locked();
  void push_locked(const char* when);

  PrometheusRunInfo run_;
  PrometheusOutputs outputs_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<MetricsCollectable> metrics_;
  prometheus::Family<prometheus::Gauge>* current_case_family_ = nullptr;
  prometheus::Gauge* cases_done_ = nullptr;
  prometheus::Gauge* cases_failed_ = nullptr;
  prometheus::Gauge* current_case_ = nullptr;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<prometheus::Gateway> gateway_;

  mutable std::mutex mutex_;
  std::set<std::string> failed_cases_;
  std::chrono::steady_clock::time_point last_textfile_{};
  std::optional<std::string> deferred_error_;  // from a refresh, reported by close()
  bool closed_ = false;
};

}  // namespace dts

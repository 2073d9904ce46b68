// PrometheusSink implementation: Records kept as metric families (prometheus-cpp's data model),
// serialized with its TextSerializer for the textfile, pushed with its Gateway, served with its
// Exposer. Why these names and labels: results/SCHEMA.md, "Prometheus".
#include "results/prometheus_sink.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <unistd.h>

#include <prometheus/check_names.h>
#include <prometheus/client_metric.h>
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gateway.h>
#include <prometheus/gauge.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <future>
#include <limits>
#include <map>
#include <thread>

#include "core/error.h"
#include "results/catalog.h"
#include "results/output_paths.h"

namespace dts {

namespace {

constexpr const char* kJob = "dtsuite";
constexpr const char* kPrefix = "dtsuite_";
constexpr const char* kVerdictFamily = "dtsuite_verdict";
constexpr const char* kSchemaPointer = " (results/SCHEMA.md)";
constexpr const char* kCurrentCaseFamily = "dtsuite_current_case_info";
constexpr const char* kCurrentCaseHelp =
    "1 while a case runs, labelled with its suite and case id; absent between cases and after the run";

using LabelList = std::vector<std::pair<std::string, std::string>>;

// Prometheus metric names are [a-zA-Z_:][a-zA-Z0-9_:]*; ':' is for recording rules, so it is
// replaced too. CSV metric names and units are already in this alphabet; this is a guard.
std::string sanitize(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) c = '_';
  }
  return out;
}

bool ends_with_word(std::string_view name, std::string_view word) {
  if (name == word) return true;
  return name.size() > word.size() && name.substr(name.size() - word.size()) == word &&
         name[name.size() - word.size() - 1] == '_';
}

std::string with_unit(std::string name, std::string_view unit) {
  const std::string u = sanitize(unit);
  if (!u.empty() && !ends_with_word(name, u)) name += "_" + u;
  return name;
}

std::string exact_number(double value) {
  char buffer[32];  // the longest shortest form of a double is 24 chars
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

std::vector<prometheus::ClientMetric::Label> to_client_labels(const LabelList& labels) {
  std::vector<prometheus::ClientMetric::Label> out;
  out.reserve(labels.size());
  for (const auto& [name, value] : labels) out.push_back({name, value});
  return out;
}

[[noreturn]] void throw_io(const std::string& what) { throw Error(Error::Kind::io, what); }

std::string base64url(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(bytes[i]) << 16) | (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                       static_cast<unsigned char>(bytes[i + 2]);
    for (int shift : {18, 12, 6, 0}) out += kAlphabet[(v >> shift) & 63];
  }
  const size_t rest = bytes.size() - i;
  if (rest > 0) {
    unsigned v = static_cast<unsigned char>(bytes[i]) << 16;
    if (rest == 2) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string push_failure_reason(int code) {
  // prometheus-cpp's Gateway returns the HTTP status, or a negated CURLcode when no answer came.
  if (code < 0) return curl_easy_strerror(static_cast<CURLcode>(-code));
  return "HTTP status " + std::to_string(code);
}

}  // namespace

// Everything the sink exports: the registry's fixed families (build info, progress), then one
// family per record metric. One Collectable, because prometheus-cpp's Gateway sends each
// registered Collectable as its own request and a PUT of the second would replace the first.
class MetricsCollectable final : public prometheus::Collectable {
 public:
  explicit MetricsCollectable(std::shared_ptr<prometheus::Registry> registry) : registry_(std::move(registry)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> out = registry_->Collect();
    // The registry leaves out a family with no series; this one is kept (TYPE and HELP only), so
    // the textfile of a finished run still lists every family dashboards may query.
    const bool has_current_case = std::any_of(out.begin(), out.end(), [](const prometheus::MetricFamily& f) {
      return f.name == kCurrentCaseFamily;
    });
    if (!has_current_case) out.push_back({kCurrentCaseFamily, kCurrentCaseHelp, prometheus::MetricType::Gauge, {}});
    std::lock_guard lock(mutex_);
    for (const auto& [name, family] : families_) {
      prometheus::MetricFamily f;
      f.name = name;
      f.help = family.help;
      f.type = family.type;
      for (const auto& [key, metric] : family.series) f.metric.push_back(metric);
      out.push_back(std::move(f));
    }
    return out;
  }

  void add(const Record& r) {
    // Per-epoch curves (convergence) would all share one series; the CSV keeps them, and the
    // final_* metrics are what a dashboard tracks.
    if (config_value(r.labels.config, "epoch")) return;
    const LabelList labels = prometheus_labels(r);
    std::lock_guard lock(mutex_);
    const std::string name = prometheus_metric_name(r.metric, r.unit);
    const bool distribution = r.stats.n > 0;
    Family& family = family_for(name, distribution ? prometheus::MetricType::Summary : prometheus::MetricType::Gauge,
                                "dtsuite metric " + r.metric + (r.unit.empty() ? "" : " in " + r.unit) +
                                    (distribution ? ", quantiles over the timed iterations" : "") + kSchemaPointer);
    prometheus::ClientMetric metric;
    metric.label = to_client_labels(labels);
    if (family.type == prometheus::MetricType::Summary) {
      // A record without a distribution in a summary family is one sample: every quantile is it.
      const Stats s = distribution ? r.stats : Stats{1, r.value, r.value, r.value, r.value, r.value};
      metric.summary.sample_count = static_cast<std::uint64_t>(s.n);
      // dtsuite keeps order statistics, not sums: NaN says "unknown" rather than a wrong number.
      metric.summary.sample_sum = std::numeric_limits<double>::quiet_NaN();
      metric.summary.quantile = {{0.05, s.p05}, {0.5, s.median}, {0.95, s.p95}};
    } else {
      metric.gauge.value = distribution ? r.stats.median : r.value;
    }
    family.series[labels] = std::move(metric);

    if (!std::isnan(r.threshold)) {
      Family& limits = family_for(prometheus_threshold_name(r.metric, r.unit), prometheus::MetricType::Gauge,
                                  "the limit dtsuite metric " + r.metric + " was judged against" + kSchemaPointer);
      prometheus::ClientMetric limit;
      limit.label = to_client_labels(labels);
      limit.gauge.value = r.threshold;
      limits.series[labels] = std::move(limit);
    }

    if (r.verdict != Verdict::info) {
      // Keyed without the verdict, so a later verdict for the same series replaces the earlier.
      LabelList key = labels;
      key.emplace_back("metric", r.metric);
      LabelList shown = key;
      shown.emplace_back("verdict", std::string(name_of(r.verdict)));
      Family& verdicts = family_for(kVerdictFamily, prometheus::MetricType::Gauge,
                                    "1 for each judged record, labelled with the CSV metric it judges and its "
                                    "verdict (pass, fail, skip, timeout, xfail, xpass)" + std::string(kSchemaPointer));
      prometheus::ClientMetric verdict;
      verdict.label = to_client_labels(shown);
      verdict.gauge.value = 1;
      verdicts.series[key] = std::move(verdict);
    }
  }

 private:
  struct Family {
    std::string help;
    prometheus::MetricType type = prometheus::MetricType::Gauge;
    std::map<LabelList, prometheus::ClientMetric> series;  // ordered: stable output
  };

  static std::string_view name_of(Verdict verdict) { return name(verdict); }

  // The first record of a family decides its type; help text likewise.
  Family& family_for(const std::string& name, prometheus::MetricType type, std::string help) {
    auto [it, inserted] = families_.try_emplace(name);
    if (inserted) {
      if (!prometheus::CheckMetricName(name)) {
        families_.erase(it);
        throw Error(Error::Kind::invalid_argument, "not a valid Prometheus metric name: '" + name + "'");
      }
      it->second.type = type;
      it->second.help = std::move(help);
    }
    return it->second;
  }

  std::shared_ptr<prometheus::Registry> registry_;
  mutable std::mutex mutex_;
  std::map<std::string, Family> families_;
};

std::string prometheus_metric_name(std::string_view metric, std::string_view unit) {
  return with_unit(kPrefix + sanitize(metric.empty() ? "unnamed" : metric), unit);
}

std::string prometheus_threshold_name(std::string_view metric, std::string_view unit) {
  return with_unit(kPrefix + sanitize(metric.empty() ? "unnamed" : metric) + "_threshold", unit);
}

const std::vector<std::string>& prometheus_config_label_keys() {
  // Not labels: count (bytes says it) and what is constant over a run (steps, batch, job): they
  // would only split a stack's history at a flag change. zero and mb are layout axes (hybrid runs
  // with and without ZeRO-1; a pinned mb beside the default), stage tells a pipeline's bubble rows
  // apart: without them two cases would share one series.
  // mpi_datatype tells the mpi backend's rows of one dtype through MPI_LONG and MPI_INT64_T apart.
  static const std::vector<std::string> keys{"redop", "root",  "input",    "dp",    "tp",        "pp",
                                             "zero",  "mb",    "schedule", "stage", "optimizer", "mpi_datatype"};
  return keys;
}

LabelList prometheus_labels(const Record& r) {
  const Labels& l = r.labels;
  LabelList out;
  const auto add = [&](const char* name, std::string value) {
    if (!value.empty()) out.emplace_back(name, std::move(value));
  };
  add("suite", r.suite);
  add("backend", l.backend);
  add("device", l.device);
  if (l.world_size > 0) add("world_size", std::to_string(l.world_size));
  if (l.nodes > 0) add("nodes", std::to_string(l.nodes));
  add("op", l.op);
  add("dtype", l.dtype);
  if (l.bytes >= 0) add("bytes", std::to_string(l.bytes));
  add("placement", l.placement);
  add("strategy", l.strategy);
  // An acceptance profile's summary rows differ only in their threshold (profile/index/metric):
  // without it, the thresholds of one metric would share a series and a failure could be
  // overwritten by a pass. A profile holds a handful of thresholds: low cardinality.
  if (r.suite == "profile") add("threshold", r.case_id);
  // What the suite's catalog entry says tells its rows apart (the hardware suite's mode, rank and
  // node: the rank is the point of them, the outlier named, and a job has a handful).
  for (const std::string& key : suite_label_keys(r.suite)) add(key.c_str(), config_value(l.config, key).value_or(""));
  // The inventory's rows are the run's parts, as an info metric is (dtsuite_rank_info{rank, node,
  // gpu, ...} 1): every config key is a label. A job has a row per rank and NIC: the cardinality of
  // its ranks, constant from run to run on one cluster.
  if (r.suite == "inventory") {
    size_t from = 0;
    const std::string& config = l.config;
    while (from < config.size()) {
      size_t end = config.find(';', from);
      if (end == std::string::npos) end = config.size();
      const std::string pair = config.substr(from, end - from);
      const size_t eq = pair.find('=');
      if (eq != std::string::npos && prometheus::CheckLabelName(pair.substr(0, eq))) {
        out.emplace_back(pair.substr(0, eq), pair.substr(eq + 1));
      }
      from = end + 1;
    }
    return out;
  }
  for (const std::string& key : prometheus_config_label_keys()) {
    if (auto value = config_value(l.config, key)) add(key.c_str(), *value);
  }
  return out;
}

PushTarget parse_push_url(const std::string& url) {
  const auto bad = [&](const std::string& why) {
    return Error(Error::Kind::invalid_argument, "--push '" + url + "': " + why + " (expected http://HOST:PORT)");
  };
  PushTarget t;
  std::string_view rest = url;
  const size_t scheme_end = rest.find("://");
  if (scheme_end != std::string_view::npos) {
    t.scheme = std::string(rest.substr(0, scheme_end));
    if (t.scheme != "http" && t.scheme != "https") throw bad("scheme must be http or https");
    rest.remove_prefix(scheme_end + 3);
  } else {
    t.scheme = "http";
  }
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    t.path = std::string(rest.substr(slash));
    while (!t.path.empty() && t.path.back() == '/') t.path.pop_back();
  }
  if (authority.find('@') != std::string_view::npos) throw bad("credentials in the URL are not supported");
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) throw bad("unclosed '['");
    t.host = std::string(authority.substr(0, close + 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') throw bad("junk after ']'");
      port = after.substr(1);
      if (port.empty()) throw bad("empty port");
    }
  } else {
    const size_t colon = authority.rfind(':');
    t.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) throw bad("empty port");
    }
  }
  if (t.host.empty() || t.host == "[]") throw bad("no host");
  if (port.empty()) {
    t.port = t.scheme == "https" ? "443" : "80";
  } else {
    int value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc{} || end != port.data() + port.size() || value < 1 || value > 65535) {
      throw bad("port must be 1..65535");
    }
    t.port = std::string(port);
  }
  return t;
}

std::pair<std::string, std::string> grouping_key_segment(const std::string& name, const std::string& value) {
  bool safe = !value.empty();
  for (char c : value) {
    const bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                            c == '.' || c == '_' || c == '~';
    safe = safe && unreserved;
  }
  if (safe) return {name, value};
  // The Pushgateway's own escape for values with '/' or other URL-unsafe bytes, and for "".
  return {name + "@base64", value.empty() ? "=" : base64url(value)};
}

std::string metrics_listening_port(const std::string& address, int port) {
  const bool bare_ipv6 = address.find(':') != std::string::npos && address.front() != '[';
  return (bare_ipv6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
}

PrometheusSink::PrometheusSink(PrometheusRunInfo run, PrometheusOutputs outputs)
    : run_(std::move(run)), outputs_(std::move(outputs)), registry_(std::make_shared<prometheus::Registry>()) {
  metrics_ = std::make_shared<MetricsCollectable>(registry_);
  prometheus::BuildGauge()
      .Name("dtsuite_build_info")
      .Help("1, labelled with what ran: dtsuite version, the stack under test and its versions, the run")
      .Register(*registry_)
      .Add({{"version", run_.version},
            {"backend", run_.backend},
            {"backend_version", run_.backend_version},
            {"mpi_version", run_.mpi_version},
            {"device", run_.device},
            {"host", run_.host},
            {"run_id", run_.run_id}})
      .Set(1);
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  prometheus::BuildGauge()
      .Name("dtsuite_run_start_time_seconds")
      .Help("when the run started, seconds since the Unix epoch; tells runs apart in the dashboards' rules")
      .Register(*registry_)
      .Add({})
      .Set(std::chrono::duration<double>(now).count());
  prometheus::BuildGauge()
      .Name("dtsuite_cases_planned")
      .Help("cases the run will go through")
      .Register(*registry_)
      .Add({})
      .Set(static_cast<double>(run_.planned_cases));
  cases_done_ = &prometheus::BuildGauge()
                     .Name("dtsuite_cases_done")
                     .Help("cases finished so far, whatever their verdict")
                     .Register(*registry_)
                     .Add({});
  cases_failed_ = &prometheus::BuildGauge()
                       .Name("dtsuite_cases_failed")
                       .Help("cases with a fail or timeout verdict so far")
                       .Register(*registry_)
                       .Add({});
  current_case_family_ = &prometheus::BuildGauge()
                              .Name(kCurrentCaseFamily)
                              .Help(kCurrentCaseHelp)
                              .Register(*registry_);

  // Set-up order: the cheapest checks first, so a bad flag costs no network round trip.
  std::optional<PushTarget> target;
  if (!outputs_.push_url.empty()) target = parse_push_url(outputs_.push_url);
  if (outputs_.metrics_port != 0) {
    const std::string address = metrics_listening_port(outputs_.bind_address, outputs_.metrics_port);
    // civetweb's defaults (2 workers here, 30 s to wait for a request) let a few hundred idle
    // connections starve the scraper for an hour; these bound what each one can hold.
    const std::string timeout = std::to_string(kMetricsRequestTimeout.count());
    // No keep-alive: a scraper's connection is freed as soon as it has its answer.
    std::vector<std::string> options{"listening_ports",    address, "num_threads",       std::to_string(kMetricsThreads),
                                     "request_timeout_ms", timeout, "enable_keep_alive", "no"};
    try {
      exposer_ = std::make_unique<prometheus::Exposer>(std::move(options));
    } catch (const std::exception& e) {
      // Debian's civetweb is built without IPv6: an IPv6 address fails as "null context when
      // constructing CivetServer", which says nothing a user can act on.
      if (address.find('[') != std::string::npos) {
        throw_io("cannot serve /metrics on " + address + ": the HTTP server refused it (civetweb built without " +
                 "IPv6, as Debian 12's is, or the port is in use); give --metrics-address an IPv4 address");
      }
      throw_io("cannot serve /metrics on " + address + " (port in use or not allowed): " + e.what());
    }
    exposer_->RegisterCollectable(metrics_);
  }
  if (!outputs_.textfile_path.empty()) write_textfile_locked();
  if (target) {
    prometheus::Labels grouping;
    for (const auto& [name, value] : {std::pair<std::string, std::string>{"run_id", run_.run_id}, {"host", run_.host}}) {
      grouping.insert(grouping_key_segment(name, value));
    }
    // prometheus-cpp builds "<host>:<port>/metrics/job/..."; a path prefix rides on the port.
    gateway_ = std::make_shared<prometheus::Gateway>(target->scheme + "://" + target->host, target->port + target->path,
                                                     kJob, grouping);
    gateway_->RegisterCollectable(metrics_);
    push_locked("at set-up");  // proves the gateway is there; the run's first state goes up with it
  }
}

PrometheusSink::~PrometheusSink() = default;

void PrometheusSink::write(const Record& record) {
  std::lock_guard lock(mutex_);
  if (closed_) return;
  metrics_->add(record);
  if (is_failure(record.verdict)) {
    failed_cases_.insert(record.case_id);
    cases_failed_->Set(static_cast<double>(failed_cases_.size()));
  }
}

void PrometheusSink::case_started(size_t /*index*/, std::string_view suite, std::string_view case_id) {
  std::lock_guard lock(mutex_);
  if (closed_) return;
  if (current_case_) current_case_family_->Remove(current_case_);
  current_case_ = &current_case_family_->Add({{"suite", std::string(suite)}, {"case", std::string(case_id)}});
  current_case_->Set(1);
}

void PrometheusSink::case_finished(size_t /*index*/) {
  std::lock_guard lock(mutex_);
  if (closed_) return;
  if (current_case_) current_case_family_->Remove(current_case_);
  current_case_ = nullptr;
  cases_done_->Increment();
  if (outputs_.textfile_path.empty()) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_textfile_ < outputs_.textfile_refresh) return;
  try {
    write_textfile_locked();
  } catch (const std::exception& e) {
    if (!deferred_error_) deferred_error_ = e.what();
  }
}

void PrometheusSink::close() {
  std::lock_guard lock(mutex_);
  if (closed_) return;
  closed_ = true;
  if (current_case_) current_case_family_->Remove(current_case_);  // a timeout closes mid-case
  current_case_ = nullptr;
  std::string errors;
  const auto note = [&](const std::string& what) { errors += (errors.empty() ? "" : "; ") + what; };
  if (deferred_error_) note(*deferred_error_);
  if (!outputs_.textfile_path.empty()) {
    try {
      write_textfile_locked();
    } catch (const std::exception& e) {
      note(e.what());
    }
  }
  if (gateway_) {
    try {
      push_locked("at the end");
    } catch (const std::exception& e) {
      note(e.what());
    }
  }
  exposer_.reset();  // the run is over; nothing live to serve
  if (!errors.empty()) throw_io(errors);
}

std::string PrometheusSink::exposition() const {
  return prometheus::TextSerializer().Serialize(metrics_->Collect());
}

int PrometheusSink::metrics_port() const {
  std::lock_guard lock(mutex_);
  if (!exposer_) return 0;
  const auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

void PrometheusSink::write_textfile_locked() {
  // node_exporter may read the file at any moment: the whole new text or the old file, never a
  // part (a temporary beside it, named so the collector ignores it, renamed over it).
  replace_file_atomically({"--prom", outputs_.textfile_path}, exposition());
  last_textfile_ = std::chrono::steady_clock::now();
}

void PrometheusSink::push_locked(const char* when) {
  // Gateway::Push has no timeout of its own; it runs on a thread we can stop waiting for. A push
  // that never returns is left behind (it holds the gateway alive) and reported as a failure.
  auto done = std::make_shared<std::promise<int>>();
  std::future<int> result = done->get_future();
  std::thread([gateway = gateway_, done] {
    int code = -1;
    try {
      code = gateway->Push();
    } catch (...) {
      code = -static_cast<int>(CURLE_FAILED_INIT);
    }
    done->set_value(code);
  }).detach();
  std::string reason;
  if (result.wait_for(outputs_.push_timeout) != std::future_status::ready) {
    reason = "no answer within " + exact_number(std::chrono::duration<double>(outputs_.push_timeout).count()) + " s";
  } else if (const int code = result.get(); code < 200 || code >= 300) {
    reason = push_failure_reason(code);
  }
  if (!reason.empty()) {
    throw_io("cannot push " + std::string(when) + " to the Pushgateway at " + outputs_.push_url + ": " + reason);
  }
}

}  // namespace dts

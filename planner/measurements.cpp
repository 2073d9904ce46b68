// The planner's index of measurements (measurements.h).
#include "planner/measurements.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

#include "core/error.h"
#include "planner/cost_model.h"
#include "results/noise.h"

namespace dts::planner {

namespace {

bool is_reducing(std::string_view collective) {
  return collective == "all_reduce" || collective == "reduce_scatter" || collective == "reduce";
}

// The model a scaling row timed, from its config; nullopt when a key is missing or not a number.
std::optional<std::pair<ModelSpec, int64_t>> timed_model(const std::string& config) {
  ModelSpec spec;
  int64_t batch = 0;
  for (const auto& [key, field] : {std::pair<const char*, int*>{"layers", &spec.layers}, {"width", &spec.width},
                                   {"input", &spec.input}, {"classes", &spec.classes}}) {
    const std::string text = config_value(config, key).value_or("");
    char* end = nullptr;
    const long value = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || value < 1 || value > (1L << 30)) return std::nullopt;
    *field = static_cast<int>(value);
  }
  const std::string text = config_value(config, "batch").value_or("");
  char* end = nullptr;
  batch = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || batch < 1 || spec.classes < 2) return std::nullopt;
  return std::make_pair(spec, batch);
}

// Rows that measured something: a skipped, failed or timed-out case's numbers are not the stack's.
bool usable(const Record& r) { return r.verdict != Verdict::skip && !is_failure(r.verdict) && r.verdict != Verdict::xfail; }

// The time a row the planner takes stands for (a bandwidth's: its bytes over the rate), refused
// at its line when no clock reads it: NaN, zero and 1e200 s were left out in silence or priced
// every call at 0 s.
void check_figure(const Record& r, const std::string& where) {
  const bool bandwidth = r.metric == "p2p_bandwidth";
  const double seconds = bandwidth ? static_cast<double>(r.labels.bytes) / r.value : r.value;
  if (r.value > 0 && seconds >= kShortestFitTime && seconds <= kLongestFitTime) return;
  throw Error(Error::Kind::invalid_argument,
              where + ": " + r.metric + " " + format_number(r.value) + " " + r.unit +
                  (bandwidth ? " (" + std::to_string(r.labels.bytes) + " bytes in " + format_number(seconds) + " s)" : "") +
                  " is no clock's reading: the planner fits times of " + format_number(kShortestFitTime) + " .. " +
                  format_number(kLongestFitTime) + " s");
}

}  // namespace

std::string GroupShape::text() const {
  std::string t = std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks") + " on " + std::to_string(nodes) +
                  (nodes == 1 ? " node" : " nodes");
  if (nodes > 1) t += " (" + std::to_string(ranks_per_node) + " per node)";
  return t;
}

GroupShape GroupShape::normalized() const {
  if (nodes > 1) return *this;
  return {ranks, 1, ranks};
}

std::string StackIdentity::text() const {
  // Version lines in a few words ("Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4"); the
  // MPI library once where the backend is MPI itself.
  std::string t = backend;
  const std::string version = short_mpi(backend_version), mpi = short_mpi(mpi_version);
  if (!version.empty()) t += " " + version;
  if (!mpi.empty() && mpi != version) {
    t += " (" + mpi + (mpi_config.empty() ? "" : ", " + mpi_config) + ")";
  } else if (!mpi_config.empty()) {
    t += " (" + mpi_config + ")";
  }
  if (!device.empty()) t += " on " + device;
  return t;
}

StackIdentity stack_of(const Labels& labels) {
  return {labels.backend, labels.backend_version, labels.mpi_version, labels.device, labels.mpi_config};
}

void Measurements::add(const std::vector<Record>& records, const std::string& source) {
  std::map<CollectiveKey, std::vector<TimedSize>> collectives;
  std::map<std::string, std::vector<TimedSize>, std::less<>> links;
  std::vector<TimedSize> computes;
  std::map<std::string, std::map<int64_t, std::vector<double>>> rates;
  int file_cores = 0, without_model = 0;
  // The file's stack is taken only once the whole file is read: a refused file leaves nothing.
  StackIdentity file_stack;
  bool file_has_stack = false;
  for (size_t row = 0; row < records.size(); ++row) {
    const Record& r = records[row];
    if (!usable(r)) continue;
    // An empty call is the library's no-op, not a point of its line.
    const bool collective = r.suite == "collectives" && r.metric == "time" && r.labels.placement == "out_of_place" &&
                            r.labels.bytes > 0 && !r.labels.op.empty();
    // A message of no bytes has no bandwidth to turn into a time.
    const bool p2p = r.suite == "topology" && r.labels.bytes >= 0 &&
                     ((r.metric == "p2p_bandwidth" && r.labels.bytes > 0 &&
                       config_value(r.labels.config, "direction") == "one-way") ||
                      r.metric == "p2p_latency");
    const bool compute = r.suite == "scaling" && r.metric == "step_time" && !r.labels.strategy.empty() &&
                         r.labels.world_size == 1;
    if (!collective && !p2p && !compute) continue;
    check_figure(r, source + ":" + std::to_string(row + 2));
    const StackIdentity stack = stack_of(r.labels);
    if (!file_has_stack) {
      file_stack = stack;
      file_has_stack = true;
    } else if (!(stack == file_stack)) {
      throw Error(Error::Kind::invalid_argument, source + " holds measurements of two stacks (" + file_stack.text() +
                                                     "; " + stack.text() + "): plan from one stack's measurements");
    }
    if (have_stack_ && !(stack == stack_)) {
      throw Error(Error::Kind::invalid_argument,
                  source + " holds measurements of another stack (" + stack.text() + ") than " + stack_source_ + " (" +
                      stack_.text() + "): plan from one stack's measurements");
    }
    const auto bytes = static_cast<double>(r.labels.bytes);
    if (compute) {
      // A step slowed on purpose (a straggler injected) times the injection, not the stack.
      if (config_value(r.labels.config, "straggler")) continue;
      const auto model = timed_model(r.labels.config);
      const std::string mb_text = config_value(r.labels.config, "mb").value_or("1");
      char* mb_end = nullptr;
      const long long mb = std::strtoll(mb_text.c_str(), &mb_end, 10);
      if (model && *mb_end == '\0' && mb >= 1 && mb <= model->second) {
        // With gradient accumulation (mb > 1) the step is mb micro-batches, the fullest of
        // ceil(batch / mb) rows: its rate is keyed by those rows, over the whole batch's FLOPs.
        const int64_t rows = (model->second + mb - 1) / mb;
        const double flops = step_flops(r.labels.strategy, model->first, model->second);
        if (r.labels.strategy == "ddp") computes.push_back({flops, r.value});
        rates[r.labels.strategy][rows].push_back(r.value / flops);
      } else if (r.labels.strategy == "ddp") {
        ++without_model;
      }
      const std::string cores = config_value(r.labels.config, "cores").value_or("");
      if (r.labels.device.rfind("cpu", 0) == 0 && !cores.empty()) file_cores = std::max(file_cores, std::atoi(cores.c_str()));
      continue;
    }
    if (collective) {
      const std::string redop = config_value(r.labels.config, "redop").value_or("");
      if (is_reducing(r.labels.op) && redop != "sum") continue;  // gradients are summed
      const GroupShape shape =
          GroupShape{r.labels.world_size, std::max(1, r.labels.nodes), r.labels.ranks_per_node}.normalized();
      collectives[{r.labels.op, r.labels.dtype, shape}].push_back({bytes, r.value});
      continue;
    }
    const std::string link = config_value(r.labels.config, "link").value_or("");
    if (link != kSameNode && link != kOtherNode) continue;
    // Bandwidth rows: bytes / rate is the message's time; latency rows are already a time.
    links[link].push_back({bytes, r.metric == "p2p_bandwidth" ? bytes / r.value : r.value});
  }
  if (file_has_stack && !have_stack_) {
    stack_ = file_stack;
    stack_source_ = source;
    have_stack_ = true;
  }
  for (auto& [key, points] : collectives) {
    auto& all = collective_points_[key];
    all.insert(all.end(), points.begin(), points.end());
    collective_fits_.erase(key);
  }
  for (auto& [key, points] : links) {
    auto& all = link_points_[key];
    all.insert(all.end(), points.begin(), points.end());
    link_fits_.erase(key);
  }
  compute_rows_without_model_ += without_model;
  if (!computes.empty()) {
    compute_points_.insert(compute_points_.end(), computes.begin(), computes.end());
    compute_fit_.reset();
  }
  for (auto& [strategy, by_rows] : rates) {
    for (auto& [rows, values] : by_rows) {
      std::vector<double>& all = compute_rates_[strategy][rows];
      all.insert(all.end(), values.begin(), values.end());
    }
  }
  if (!rates.empty()) compute_cores_ = std::max(compute_cores_, file_cores);
  sources_.push_back(source);
}

std::string Measurements::sources() const {
  std::string text;
  for (const std::string& s : sources_) text += (text.empty() ? "" : ", ") + s;
  return text.empty() ? "no files" : text;
}

AlphaBetaFit Measurements::collective(std::string_view collective, std::string_view dtype,
                                      const GroupShape& asked) const {
  const GroupShape shape = asked.normalized();
  const CollectiveKey key{std::string(collective), std::string(dtype), shape};
  if (const auto fit = collective_fits_.find(key); fit != collective_fits_.end()) return fit->second;
  const auto points = collective_points_.find(key);
  std::string why;
  if (points != collective_points_.end()) {
    try {
      return collective_fits_.emplace(key, fit_alpha_beta(points->second)).first->second;
    } catch (const Error& e) {
      why = std::string(e.what()) + " from " + std::to_string(points->second.size()) + " rows";
    }
  } else {
    // A shape measured at one size has no line to extend from: said, with the sizes it has.
    std::set<std::string> measured;
    for (const auto& [k, v] : collective_points_) {
      if (std::get<0>(k) != collective || std::get<1>(k) != dtype) continue;
      std::string shape_text = std::get<2>(k).text();
      if (!collective_fits_.count(k)) {
        try {
          collective_fits_.emplace(k, fit_alpha_beta(v));
        } catch (const Error& e) {
          shape_text += " (" + std::string(e.what()) + ")";
        }
      }
      measured.insert(shape_text);
    }
    why = "not measured";
    if (!measured.empty()) {
      why += " (measured on ";
      for (const std::string& m : measured) why += (why.back() == ' ' ? "" : "; ") + m;
      why += ")";
    }
  }
  const std::string placement =
      shape.nodes > 1 ? ", on " + std::to_string(shape.nodes) + " nodes of " + std::to_string(shape.ranks_per_node) + " ranks"
                      : "";
  throw Error(Error::Kind::invalid_argument,
              std::string(collective) + " in " + std::string(dtype) + " on " + shape.text() + ": " + why + " in " +
                  sources() + "; measure it with `mpirun -np " + std::to_string(shape.ranks) +
                  " dtsuite run collectives --collective " + std::string(collective) + " -d " + std::string(dtype) +
                  (is_reducing(collective) ? " -o sum" : "") + " -b 8 -e 256M -f 2 --csv FILE`" + placement);
}

std::optional<AlphaBetaFit> Measurements::extended(std::string_view collective, std::string_view dtype,
                                                   const GroupShape& asked, std::string& from) const {
  const GroupShape shape = asked.normalized();
  const bool all_reduce = collective == "all_reduce";
  if (!all_reduce && collective != "reduce_scatter" && collective != "all_gather") return std::nullopt;
  if (shape.ranks < 2) return std::nullopt;
  const auto bus_factor = [&](double n) { return (all_reduce ? 2 : 1) * (n - 1) / n; };
  std::optional<GroupShape> best;
  double best_distance = 0;
  for (const auto& [key, points] : collective_points_) {
    const auto& [name, type, measured] = key;
    if (name != collective || type != dtype || measured.ranks < 2 || (measured.nodes > 1) != (shape.nodes > 1)) continue;
    // The same ranks per node before any other; then the nearest in ranks (by ratio).
    const double distance = (measured.ranks_per_node == shape.ranks_per_node ? 0 : 100) +
                            std::abs(std::log(static_cast<double>(shape.ranks) / measured.ranks));
    if (best && distance >= best_distance) continue;
    try {
      this->collective(name, type, measured);  // a shape whose rows give no line is no source
    } catch (const Error&) {
      continue;
    }
    best = measured;
    best_distance = distance;
  }
  if (!best) return std::nullopt;
  AlphaBetaFit fit = this->collective(collective, dtype, *best);
  const double n = shape.ranks, n0 = best->ranks;
  for (AlphaBetaPiece& piece : fit.pieces) {
    piece.alpha *= (n - 1) / (n0 - 1);
    piece.inverse_beta *= bus_factor(n) / bus_factor(n0);
  }
  from = std::string(collective) + " " + std::string(dtype) + " on " + shape.text() + ": extended from " +
         best->text() + " by the ring model (latency x " + format_number((n - 1) / (n0 - 1), "%.3g") +
         ", bus bandwidth kept)";
  return fit;
}

AlphaBetaFit Measurements::link(std::string_view link) const {
  if (const auto fit = link_fits_.find(link); fit != link_fits_.end()) return fit->second;
  const auto points = link_points_.find(link);
  std::string why = "not measured";
  if (points != link_points_.end()) {
    try {
      return link_fits_.emplace(std::string(link), fit_alpha_beta(points->second)).first->second;
    } catch (const Error& e) {
      why = e.what();
    }
  }
  throw Error(Error::Kind::invalid_argument,
              "point-to-point messages " + std::string(link) + ": " + why + " in " + sources() +
                  "; measure them with `mpirun -np 2 dtsuite run topology --p2p-sweep 8:4M --csv FILE`" +
                  (link == kOtherNode ? " with the two ranks on two nodes" : " with the two ranks on one node"));
}

AlphaBetaFit Measurements::compute() const {
  if (compute_fit_) return *compute_fit_;
  std::string why = "not measured";
  if (compute_rows_without_model_ > 0) {
    why += " (" + std::to_string(compute_rows_without_model_) +
           " one-rank ddp step_time rows lack the model they timed: layers, width, input, classes, batch in config; "
           "rows of a dtsuite that wrote none)";
  }
  if (!compute_points_.empty()) {
    try {
      compute_fit_ = fit_alpha_beta(compute_points_);
      return *compute_fit_;
    } catch (const Error& e) {
      why = std::string(e.what()) + " from " + std::to_string(compute_points_.size()) + " rows";
    }
  }
  throw Error(Error::Kind::invalid_argument,
              "compute (one rank's training step against its FLOPs): " + why + " in " + sources() +
                  "; measure it with `dtsuite run scaling --strategy all --scaling-mode weak --rank-batch R --csv "
                  "FILE` (one rank's steps, the model flags of the plan; once per R, the micro-batch rows the layouts "
                  "use, e.g. 16, 64, 256)");
}

namespace {

// The value at `rows` of points measured at some row counts: between two, linear in log(rows);
// outside them, the nearest's. `points` is not empty.
double at_rows(const std::map<int64_t, double>& points, int64_t rows) {
  const auto above = points.lower_bound(rows);
  if (above == points.end()) return std::prev(above)->second;
  if (above->first == rows || above == points.begin()) return above->second;
  const auto below = std::prev(above);
  const double x = std::log(static_cast<double>(rows)), x0 = std::log(static_cast<double>(below->first)),
               x1 = std::log(static_cast<double>(above->first));
  return below->second + (above->second - below->second) * (x - x0) / (x1 - x0);
}

std::map<int64_t, double> medians(const std::map<int64_t, std::vector<double>>& by_rows) {
  std::map<int64_t, double> out;
  for (const auto& [rows, values] : by_rows) out[rows] = median_of(values);
  return out;
}

}  // namespace

double Measurements::compute_rate(int64_t rows, std::string_view strategy) const {
  const auto ddp = compute_rates_.find("ddp");
  if (ddp == compute_rates_.end()) {
    compute();  // throws what is missing, and the command, when no ddp row was taken
    throw Error(Error::Kind::invalid_argument, "compute: no one-rank ddp steps in " + sources());
  }
  const double rate = at_rows(medians(ddp->second), rows);
  return strategy == "ddp" ? rate : rate * compute_factor(strategy, rows);
}

double Measurements::compute_factor(std::string_view strategy, int64_t rows) const {
  const auto own = compute_rates_.find(strategy);
  if (strategy == "ddp" || own == compute_rates_.end()) return 1;
  std::map<int64_t, double> ratios;
  for (const auto& [measured, rate] : medians(own->second)) ratios[measured] = rate / compute_rate(measured);
  return at_rows(ratios, rows);
}

std::pair<int64_t, int64_t> Measurements::compute_rows() const {
  const auto ddp = compute_rates_.find("ddp");
  if (ddp == compute_rates_.end() || ddp->second.empty()) return {0, 0};
  return {ddp->second.begin()->first, ddp->second.rbegin()->first};
}

std::vector<CollectiveFit> Measurements::collectives() const {
  std::vector<CollectiveFit> out;
  for (const auto& [key, points] : collective_points_) {
    const auto& [name, dtype, shape] = key;
    try {
      out.push_back({name, dtype, shape, collective(name, dtype, shape)});
    } catch (const Error&) {
      // Too few sizes for a line: left out here, refused where a layout needs it.
    }
  }
  return out;
}

void refuse_repeated_files(const std::vector<std::string>& paths, std::string_view flag) {
  std::map<std::pair<dev_t, ino_t>, const std::string*> seen;
  for (const std::string& path : paths) {
    struct stat file {};
    if (::stat(path.c_str(), &file) != 0) continue;
    const auto [at, first] = seen.emplace(std::pair{file.st_dev, file.st_ino}, &path);
    if (first) continue;
    throw Error(Error::Kind::invalid_argument, std::string(flag) + " " + *at->second + " and " + std::string(flag) + " " +
                                                   path + " are one file: its rows would count twice; give each once");
  }
}

}  // namespace dts::planner

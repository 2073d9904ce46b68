// The planner's index of measurements (measurements.h).
#include "planner/measurements.h"

#include <set>

#include "core/error.h"

namespace dts::planner {

namespace {

bool is_reducing(std::string_view collective) {
  return collective == "all_reduce" || collective == "reduce_scatter" || collective == "reduce";
}

bool usable(const Record& r) {
  return r.verdict != Verdict::skip && !is_failure(r.verdict) && r.verdict != Verdict::xfail && r.value > 0;
}

}  // namespace

std::string GroupShape::text() const {
  std::string t = std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks") + " on " + std::to_string(nodes) +
                  (nodes == 1 ? " node" : " nodes");
  if (nodes > 1) t += " (" + std::to_string(ranks_per_node) + " per node)";
  return t;
}

std::string StackIdentity::text() const {
  // Version lines in a few words ("Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4"); the
  // MPI library once where the backend is MPI itself.
  std::string t = backend;
  const std::string version = short_mpi(backend_version), mpi = short_mpi(mpi_version);
  if (!version.empty()) t += " " + version;
  if (!mpi.empty() && mpi != version) t += " (" + mpi + ")";
  if (!device.empty()) t += " on " + device;
  return t;
}

StackIdentity stack_of(const Labels& labels) {
  return {labels.backend, labels.backend_version, labels.mpi_version, labels.device};
}

void Measurements::add(const std::vector<Record>& records, const std::string& source) {
  std::map<CollectiveKey, std::vector<TimedSize>> collectives;
  std::map<std::string, std::vector<TimedSize>, std::less<>> links;
  for (const Record& r : records) {
    if (!usable(r)) continue;
    // An empty call is the library's no-op, not a point of its line.
    const bool collective = r.suite == "collectives" && r.metric == "time" && r.labels.placement == "out_of_place" &&
                            r.labels.bytes > 0 && !r.labels.op.empty();
    const bool p2p = r.suite == "topology" && r.labels.bytes >= 0 &&
                     ((r.metric == "p2p_bandwidth" && config_value(r.labels.config, "direction") == "one-way") ||
                      r.metric == "p2p_latency");
    if (!collective && !p2p) continue;
    const StackIdentity stack = stack_of(r.labels);
    if (!have_stack_) {
      stack_ = stack;
      stack_source_ = source;
      have_stack_ = true;
    } else if (!(stack == stack_)) {
      throw Error(Error::Kind::invalid_argument,
                  source + " holds measurements of another stack (" + stack.text() + ") than " + stack_source_ + " (" +
                      stack_.text() + "): plan from one stack's measurements");
    }
    const auto bytes = static_cast<double>(r.labels.bytes);
    if (collective) {
      const std::string redop = config_value(r.labels.config, "redop").value_or("");
      if (is_reducing(r.labels.op) && redop != "sum") continue;  // gradients are summed
      const GroupShape shape{r.labels.world_size, std::max(1, r.labels.nodes), r.labels.ranks_per_node};
      collectives[{r.labels.op, r.labels.dtype, shape}].push_back({bytes, r.value});
      continue;
    }
    const std::string link = config_value(r.labels.config, "link").value_or("");
    if (link != kSameNode && link != kOtherNode) continue;
    // Bandwidth rows: bytes / rate is the message's time; latency rows are already a time.
    links[link].push_back({bytes, r.metric == "p2p_bandwidth" ? bytes / r.value : r.value});
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
  sources_.push_back(source);
}

std::string Measurements::sources() const {
  std::string text;
  for (const std::string& s : sources_) text += (text.empty() ? "" : ", ") + s;
  return text.empty() ? "no files" : text;
}

const AlphaBetaFit& Measurements::collective(std::string_view collective, std::string_view dtype,
                                             const GroupShape& shape) const {
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
    std::set<std::string> measured;
    for (const auto& [k, v] : collective_points_) {
      if (std::get<0>(k) == collective && std::get<1>(k) == dtype) measured.insert(std::get<2>(k).text());
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

const AlphaBetaFit& Measurements::link(std::string_view link) const {
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
                  "; measure them with `mpirun -np 2 dtsuite run topology --csv FILE`" +
                  (link == kOtherNode ? " with the two ranks on two nodes" : " with the two ranks on one node"));
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

}  // namespace dts::planner

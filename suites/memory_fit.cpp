// memory_available_per_rank reads /proc/meminfo (MemAvailable: what the kernel can give without
// swapping) and the process's rlimits against /proc/self/status (VmSize, VmData).
#include "suites/memory_fit.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <tuple>
#include <vector>

#include "core/error.h"

namespace dts {

namespace {

// "Key:   1234 kB" of a /proc file, in bytes; negative when absent.
double proc_kilobytes(const char* file, const std::string& key) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(key.size() + 1));
    double kilobytes = -1;
    fields >> kilobytes;
    return kilobytes >= 0 ? kilobytes * 1024 : -1;
  }
  return -1;
}

}  // namespace

std::string format_bytes(double bytes) {
  const char* units[] = {"bytes", "kB", "MB", "GB", "TB", "PB", "EB"};
  int unit = 0;
  while (bytes >= 1000 && unit < 6) {
    bytes /= 1000;
    ++unit;
  }
  char text[48];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.3g %s", bytes, units[unit]);
  return text;
}

MemoryAvailable memory_available_per_rank(int ranks_on_node) {
  const int ranks = ranks_on_node > 0 ? ranks_on_node : 1;
  MemoryAvailable best{std::numeric_limits<double>::infinity(), "no limit known"};
  double node = proc_kilobytes("/proc/meminfo", "MemAvailable");
  std::string node_source = "MemAvailable";
  if (node < 0) {
    node = static_cast<double>(::sysconf(_SC_AVPHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
    node_source = "free memory";
  }
  if (node > 0) {
    best = {node / ranks, node_source + " " + format_bytes(node) +
                              (ranks > 1 ? " shared by " + std::to_string(ranks) + " ranks" : "")};
  }
  // ulimit -v (address space) and -d (data) bound this process whatever the node has.
  for (const auto& [resource, used_key, name] : {std::tuple{RLIMIT_AS, "VmSize", "ulimit -v"},
                                                 std::tuple{RLIMIT_DATA, "VmData", "ulimit -d"}}) {
    rlimit limit{};
    if (::getrlimit(resource, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) continue;
    const double used = std::max(0.0, proc_kilobytes("/proc/self/status", used_key));
    const double left = std::max(0.0, static_cast<double>(limit.rlim_cur) - used);
    if (left < best.bytes) best = {left, std::string(name) + " leaves " + format_bytes(left) + " to this rank"};
  }
  return best;
}

double training_bytes_at_least(const ModelSpec& spec, int64_t batch_rows, double bytes_per_parameter) {
  double parameters = 0, outputs = 0;
  const std::vector<int64_t> dims = layer_dims(spec);
  for (size_t i = 1; i < dims.size(); ++i) {
    parameters += static_cast<double>(dims[i]) * static_cast<double>(dims[i - 1] + 1);  // weights and biases
    outputs += static_cast<double>(dims[i]);
  }
  const double rows = static_cast<double>(batch_rows);
  return bytes_per_parameter * parameters + 8 * rows * static_cast<double>(spec.input) + 4 * rows * outputs;
}

std::string describe_model(const ModelSpec& spec) {
  return "a " + std::to_string(spec.layers) + "-layer MLP of width " + std::to_string(spec.width) + " (" +
         std::to_string(parameter_count(spec)) + " parameters)";
}

void check_fits(const std::string& what, double needed, const std::string& how, const MemoryAvailable& available,
                const std::string& remedy) {
  if (needed <= available.bytes) return;
  throw Error(Error::Kind::invalid_argument,
              what + " needs at least " + format_bytes(needed) + " per rank (" + how + "), and a rank here has " +
                  format_bytes(available.bytes) + " (" + available.source + "): " + remedy + ", or run on more memory");
}

}  // namespace dts

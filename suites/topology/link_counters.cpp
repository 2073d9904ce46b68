// Interface and port counters from sysfs (suites/topology/link_counters.h).
#include "suites/topology/link_counters.h"

#include <dlfcn.h>

#include <cctype>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include "core/error.h"
#include "suites/topology/nvml_abi.h"

namespace dts {

namespace {

namespace fs = std::filesystem;

// The first number in a file ("1000\n", "100 Gb/sec (4X EDR)"); nothing when unreadable or absent.
bool read_number(const fs::path& path, double& value) {
  std::ifstream in(path);
  if (!in) return false;
  std::string text;
  std::getline(in, text);
  try {
    size_t used = 0;
    value = std::stod(text, &used);
    return used > 0 && std::isfinite(value);
  } catch (const std::exception&) {
    return false;
  }
}

using NvmlFieldValue = nvml::FieldValue;
using NvmlDevice = void*;
using namespace nvml;

struct Nvml {
  int (*device_count)(unsigned*) = nullptr;
  int (*device_by_index)(unsigned, NvmlDevice*) = nullptr;
  int (*field_values)(NvmlDevice, int, NvmlFieldValue*) = nullptr;
  bool ready = false;
};

// The calls the link counters make, taken once per library.
const Nvml& open_nvml(const std::string& library) {
  static std::map<std::string, Nvml> opened;
  auto it = opened.find(library);
  if (it != opened.end()) return it->second;
  Nvml& n = opened[library];
  void* handle = open_library(library);
  if (!handle) return n;
  n.device_count = reinterpret_cast<int (*)(unsigned*)>(dlsym(handle, "nvmlDeviceGetCount_v2"));
  n.device_by_index = reinterpret_cast<int (*)(unsigned, NvmlDevice*)>(dlsym(handle, "nvmlDeviceGetHandleByIndex_v2"));
  n.field_values = reinterpret_cast<int (*)(NvmlDevice, int, NvmlFieldValue*)>(dlsym(handle, "nvmlDeviceGetFieldValues"));
  n.ready = n.device_count && n.device_by_index && n.field_values;
  return n;
}

double number_of(const NvmlFieldValue& v) {
  if (v.nvml_return != kSuccess) return -1;
  if (v.value_type == kValueUnsignedInt) return v.value.ui;
  if (v.value_type == kValueUnsignedLongLong) return static_cast<double>(v.value.ull);
  return -1;  // a type these fields do not have
}

}  // namespace

void* nvml::open_library(const std::string& library) {
  static std::mutex lock;
  static std::map<std::string, void*> opened;
  std::string path = library;
  if (path.empty()) {
    const char* env = std::getenv("DTS_NVML_LIBRARY");
    path = env && *env ? env : "libnvidia-ml.so.1";
  }
  const std::lock_guard<std::mutex> hold(lock);
  auto it = opened.find(path);
  if (it != opened.end()) return it->second;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  auto init = handle ? reinterpret_cast<int (*)()>(dlsym(handle, "nvmlInit_v2")) : nullptr;
  if (handle && (!init || init() != 0)) handle = nullptr;  // kept open: a second try would fail alike
  return opened[path] = handle;
}

std::map<std::string, LinkCounter> read_nvlink_counters(const std::string& library) {
  std::map<std::string, LinkCounter> links;
  const Nvml& n = open_nvml(library);
  unsigned count = 0;
  if (!n.ready || n.device_count(&count) != 0) return links;
  for (unsigned i = 0; i < count; ++i) {
    NvmlDevice device = nullptr;
    if (n.device_by_index(i, &device) != 0) continue;
    NvmlFieldValue fields[4] = {};
    const unsigned ids[4] = {kNvlinkThroughputDataTx, kNvlinkThroughputDataRx, kNvlinkSpeedMbpsCommon, kNvlinkLinkCount};
    for (int f = 0; f < 4; ++f) fields[f].field_id = ids[f];
    if (n.field_values(device, 4, fields) != 0) continue;
    const double tx = number_of(fields[0]), rx = number_of(fields[1]);
    const double speed = number_of(fields[2]), count_links = number_of(fields[3]);
    if (tx < 0 || count_links <= 0) continue;  // no NVLink on this GPU
    LinkCounter c;
    c.tx_bytes = static_cast<int64_t>(tx) * 1024;  // the throughput fields count KiB
    c.rx_bytes = rx < 0 ? 0 : static_cast<int64_t>(rx) * 1024;
    if (speed > 0) c.rated_bits_per_second = speed * 1e6 * 8 * count_links;  // MB/s per link
    links["nvlink:gpu" + std::to_string(i)] = c;
  }
  return links;
}

std::map<std::string, LinkCounter> read_link_counters(const std::string& sysfs) {
  std::map<std::string, LinkCounter> links;
  std::error_code ignored;
  const fs::path net = fs::path(sysfs) / "class" / "net";
  for (const auto& entry : fs::directory_iterator(net, ignored)) {
    const std::string name = entry.path().filename().string();
    if (name == "lo") continue;
    LinkCounter c;
    double tx = 0, rx = 0, speed = 0;
    if (!read_number(entry.path() / "statistics" / "tx_bytes", tx)) continue;
    read_number(entry.path() / "statistics" / "rx_bytes", rx);
    c.tx_bytes = static_cast<int64_t>(tx);
    c.rx_bytes = static_cast<int64_t>(rx);
    // An IPoIB interface (type 32, ARPHRD_INFINIBAND): its bytes are its port's, counted there.
    double type = 0;
    if (read_number(entry.path() / "type", type) && type == 32) continue;
    // speed is in Mbit/s; -1 (or unreadable: a down link) means the link does not say. A virtual
    // device (no `device` link to hardware: veth, bridge, tun) reports a nominal speed that no
    // wire backs (veth says 10000), so it counts as saying nothing.
    std::error_code no_device;
    const bool hardware = fs::exists(entry.path() / "device", no_device);
    if (hardware && read_number(entry.path() / "speed", speed) && speed > 0) c.rated_bits_per_second = speed * 1e6;
    links[name] = c;
  }
  const fs::path ib = fs::path(sysfs) / "class" / "infiniband";
  for (const auto& device : fs::directory_iterator(ib, ignored)) {
    for (const auto& port : fs::directory_iterator(device.path() / "ports", ignored)) {
      LinkCounter c;
      double tx = 0, rx = 0, rate = 0;
      // port_xmit_data and port_rcv_data count 4-byte words (the InfiniBand spec's PortCounters).
      if (!read_number(port.path() / "counters" / "port_xmit_data", tx)) continue;
      read_number(port.path() / "counters" / "port_rcv_data", rx);
      c.tx_bytes = static_cast<int64_t>(tx) * 4;
      c.rx_bytes = static_cast<int64_t>(rx) * 4;
      if (read_number(port.path() / "rate", rate) && rate > 0) c.rated_bits_per_second = rate * 1e9;  // "100 Gb/sec"
      links["ib:" + device.path().filename().string() + "/" + port.path().filename().string()] = c;
    }
  }
  return links;
}

std::map<std::string, LinkCounter> link_traffic(const std::map<std::string, LinkCounter>& before,
                                                const std::map<std::string, LinkCounter>& after) {
  std::map<std::string, LinkCounter> traffic;
  for (const auto& [name, a] : after) {
    auto b = before.find(name);
    if (b == before.end()) continue;  // a link that came up in between: no baseline
    LinkCounter d;
    d.tx_bytes = a.tx_bytes - b->second.tx_bytes;
    d.rx_bytes = a.rx_bytes - b->second.rx_bytes;
    d.rated_bits_per_second = a.rated_bits_per_second;
    traffic[name] = d;
  }
  return traffic;
}

double parse_link_speed(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = text.substr(used);
  // Bits unless the unit says bytes with a capital B ("GB/s", "GBps"): link speeds are quoted in
  // bits, and a byte rate read as bits would be 8x too small.
  double per_unit = 1;
  for (const char* suffix : {"bit/s", "bit", "b/s", "bps", "B/s", "Bps", "B"}) {
    const std::string s(suffix);
    if (unit.size() >= s.size() && unit.compare(unit.size() - s.size(), s.size(), s) == 0) {
      if (s[0] == 'B') per_unit = 8;
      unit.resize(unit.size() - s.size());
      break;
    }
  }
  for (char& ch : unit) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  double scale = 0;
  if (unit.empty()) scale = 1;
  else if (unit == "k") scale = 1e3;
  else if (unit == "m") scale = 1e6;
  else if (unit == "g") scale = 1e9;
  else if (unit == "t") scale = 1e12;
  if (used == 0 || scale == 0 || !(value > 0) || !std::isfinite(value * scale * per_unit)) {
    throw Error(Error::Kind::invalid_argument,
                "bad link speed '" + text + "' (bits per second, e.g. 1gbit, 10G, 100Gbit, 25000M; bytes as 50GB/s)");
  }
  return value * scale * per_unit;
}

}  // namespace dts

// Every rank's inventory (harness/inventory.h): /proc, sysfs and NVML, one all_gather, findings.
#include "harness/inventory.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/ranges.h"
#include "results/catalog.h"
#include "suites/topology/link_counters.h"
#include "suites/topology/nvml_abi.h"

namespace dts {
namespace {

namespace fs = std::filesystem;

std::string first_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

// The leading number of a file ("16\n", "16.0 GT/s PCIe"), or `otherwise`.
double leading_number(const fs::path& path, double otherwise) {
  const std::string text = first_line(path);
  double value = 0;
  const char* begin = text.data();
  const auto [end, ec] = std::from_chars(begin, begin + text.size(), value);
  return ec == std::errc() && end != begin && std::isfinite(value) ? value : otherwise;
}

std::string value_after_colon(const std::string& line) {
  const auto colon = line.find(':');
  if (colon == std::string::npos) return "";
  const auto start = line.find_first_not_of(" \t", colon + 1);
  return start == std::string::npos ? "" : line.substr(start);
}

void read_cpus(const fs::path& proc, RankInventory& inv) {
  std::ifstream in(proc / "cpuinfo");
  std::string line, physical;
  std::set<std::string> cores, sockets;
  while (std::getline(in, line)) {
    if (line.rfind("processor", 0) == 0) ++inv.logical_cpus;
    else if (line.rfind("model name", 0) == 0 && inv.cpu_model.empty()) inv.cpu_model = value_after_colon(line);
    else if (line.rfind("physical id", 0) == 0) physical = value_after_colon(line), sockets.insert(physical);
    else if (line.rfind("core id", 0) == 0) cores.insert(physical + "/" + value_after_colon(line));
  }
  inv.cores = static_cast<int>(cores.size());
  inv.sockets = static_cast<int>(sockets.size());
  std::ifstream status(proc / "self" / "status");
  while (std::getline(status, line)) {
    if (line.rfind("Cpus_allowed_list:", 0) == 0) inv.cpus_allowed = value_after_colon(line);
  }
}

int count_numa_nodes(const fs::path& sysfs) {
  int nodes = 0;
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator(sysfs / "devices" / "system" / "node", ignored)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 4 && name.rfind("node", 0) == 0 &&
        std::all_of(name.begin() + 4, name.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      ++nodes;
    }
  }
  return nodes;
}

std::vector<NicInventory> read_nics(const fs::path& sysfs) {
  std::vector<NicInventory> nics;
  for (const auto& [name, counter] : read_link_counters(sysfs.string())) {
    NicInventory nic;
    nic.name = name;
    nic.bits_per_second = counter.rated_bits_per_second;
    std::string layer;
    if (name.rfind("ib:", 0) == 0) {  // "ib:DEV/PORT": the port says (InfiniBand, or Ethernet for RoCE)
      const auto slash = name.find('/');
      layer = first_line(sysfs / "class" / "infiniband" / name.substr(3, slash - 3) / "ports" / name.substr(slash + 1) /
                         "link_layer");
    } else {  // ARPHRD_* of linux/if_arp.h: 1 Ethernet, 32 InfiniBand
      layer = first_line(sysfs / "class" / "net" / name / "type");
      if (layer == "1") layer = "ethernet";
      if (layer == "32") layer = "infiniband";
    }
    std::transform(layer.begin(), layer.end(), layer.begin(), [](unsigned char c) { return std::tolower(c); });
    nic.link_layer = layer;
    nics.push_back(nic);
  }
  return nics;
}

// NVML's calls the inventory makes, as nvml.h declares them.
struct NvmlPciInfo {  // nvmlPciInfo_t
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
static_assert(sizeof(NvmlPciInfo) == 68, "nvmlPciInfo_t is 68 bytes");
struct NvmlMemory {  // nvmlMemory_t
  unsigned long long total, free, used;
};
constexpr int kClockSm = 1, kClockMem = 2;  // nvmlClockType_t

struct NvmlInventory {
  int (*driver_version)(char*, unsigned) = nullptr;
  int (*cuda_driver_version)(int*) = nullptr;
  int (*by_pci_bus_id)(const char*, void**) = nullptr;
  int (*name)(void*, char*, unsigned) = nullptr;
  int (*uuid)(void*, char*, unsigned) = nullptr;
  int (*pci_info)(void*, NvmlPciInfo*) = nullptr;
  int (*memory)(void*, NvmlMemory*) = nullptr;
  int (*max_clock)(void*, int, unsigned*) = nullptr;
  bool ready = false;
};

// The calls the inventory makes, taken once per library; a call this driver lacks stays null and
// its fact unknown.
const NvmlInventory& open_nvml(const std::string& library) {
  static std::map<std::string, NvmlInventory> opened;
  auto it = opened.find(library);
  if (it != opened.end()) return it->second;
  NvmlInventory& n = opened[library];
  void* handle = nvml::open_library(library);
  if (!handle) return n;
  auto symbol = [handle](auto& slot, const char* name) {
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(handle, name));
  };
  symbol(n.driver_version, "nvmlSystemGetDriverVersion");
  symbol(n.cuda_driver_version, "nvmlSystemGetCudaDriverVersion_v2");
  symbol(n.by_pci_bus_id, "nvmlDeviceGetHandleByPciBusId_v2");
  symbol(n.name, "nvmlDeviceGetName");
  symbol(n.uuid, "nvmlDeviceGetUUID");
  symbol(n.pci_info, "nvmlDeviceGetPciInfo_v3");
  symbol(n.memory, "nvmlDeviceGetMemoryInfo");
  symbol(n.max_clock, "nvmlDeviceGetMaxClockInfo");
  n.ready = true;
  return n;
}

std::string text_of(int (*call)(void*, char*, unsigned), void* device) {
  char text[256] = {};
  if (!call || call(device, text, sizeof text - 1) != 0) return "";
  return text;
}

void read_gpu(const InventorySources& sources, const std::string& bus_id, int sm_count, RankInventory& inv) {
  GpuInventory gpu;
  gpu.pci_bus_id = sysfs_pci_address(bus_id);
  gpu.sm_count = sm_count;
  const NvmlInventory& n = open_nvml(sources.nvml_library);
  if (n.ready) {
    char text[96] = {};
    if (n.driver_version && n.driver_version(text, sizeof text - 1) == 0) inv.driver_version = text;
    int cuda = 0;  // 12040 for 12.4
    if (n.cuda_driver_version && n.cuda_driver_version(&cuda) == 0 && cuda > 0) {
      inv.cuda_driver_version = std::to_string(cuda / 1000) + "." + std::to_string(cuda % 1000 / 10);
    }
    void* device = nullptr;
    if (n.by_pci_bus_id && n.by_pci_bus_id(bus_id.c_str(), &device) == 0) {
      gpu.name = text_of(n.name, device);
      gpu.uuid = text_of(n.uuid, device);
      NvmlPciInfo pci{};
      if (gpu.pci_bus_id.empty() && n.pci_info && n.pci_info(device, &pci) == 0) {
        gpu.pci_bus_id = sysfs_pci_address(pci.bus_id);
      }
      NvmlMemory memory{};
      if (n.memory && n.memory(device, &memory) == 0) gpu.memory_bytes = memory.total;
      if (n.max_clock) {
        if (n.max_clock(device, kClockSm, &gpu.sm_clock_max_mhz) != 0) gpu.sm_clock_max_mhz = 0;
        if (n.max_clock(device, kClockMem, &gpu.memory_clock_max_mhz) != 0) gpu.memory_clock_max_mhz = 0;
      }
    }
  }
  if (!gpu.pci_bus_id.empty()) {
    const fs::path pci = fs::path(sources.sysfs) / "bus" / "pci" / "devices" / gpu.pci_bus_id;
    gpu.numa_node = static_cast<int>(leading_number(pci / "numa_node", -1));
    gpu.pcie_width = static_cast<int>(leading_number(pci / "current_link_width", 0));
    gpu.pcie_width_max = static_cast<int>(leading_number(pci / "max_link_width", 0));
    gpu.pcie_gts = leading_number(pci / "current_link_speed", 0);
    gpu.pcie_gts_max = leading_number(pci / "max_link_speed", 0);
  }
  inv.gpus.push_back(gpu);
}

std::string number(double v) {
  char text[32];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, v);
  return ec == std::errc() ? std::string(text, end) : "0";
}

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  return s;
}

template <typename T>
void parse_number(const std::string& key, const std::string& text, T& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw Error(Error::Kind::invalid_argument, "inventory: " + key + "=" + text + " is not a number");
  }
}

// "gpu.3.name" -> index 3, field "name"; a bound on the index keeps a bad text from allocating.
constexpr size_t kMaxListed = 4096;
size_t list_index(const std::string& key, const std::string& prefix, std::string& field) {
  const auto dot = key.find('.', prefix.size());
  size_t index = 0;
  if (dot == std::string::npos) throw Error(Error::Kind::invalid_argument, "inventory: malformed key " + key);
  parse_number(key, key.substr(prefix.size(), dot - prefix.size()), index);
  if (index >= kMaxListed) throw Error(Error::Kind::invalid_argument, "inventory: index too large in " + key);
  field = key.substr(dot + 1);
  return index;
}

std::string describe_rank(const RankInventory& r) {
  std::string text = "rank " + std::to_string(r.rank) + " (node " + r.node;
  if (!r.gpus.empty() && !r.gpus[0].pci_bus_id.empty()) text += ", GPU " + r.gpus[0].pci_bus_id;
  return text + ")";
}

std::string shown(const std::string& value) { return value.empty() ? "none" : value; }

std::vector<int> ranks_on(const std::vector<RankInventory>& ranks, const std::string& node) {
  std::vector<int> on;
  for (const auto& r : ranks) {
    if (r.node == node) on.push_back(r.rank);
  }
  return on;
}

// Groups `subjects` (ranks, or nodes by their lowest rank when `per_node`) by `value`; with more
// than one group, names each group but the reference: the largest, on a tie the lowest rank's.
void must_match(const std::vector<RankInventory>& all, const std::vector<RankInventory>& subjects, bool per_node,
                const std::string& item, const std::function<std::string(const RankInventory&)>& value,
                std::vector<InventoryFinding>& out) {
  std::map<std::string, std::vector<const RankInventory*>> groups;
  for (const auto& s : subjects) groups[value(s)].push_back(&s);
  if (groups.size() < 2) return;
  auto reference = groups.begin();
  for (auto g = groups.begin(); g != groups.end(); ++g) {
    if (g->second.size() > reference->second.size() ||
        (g->second.size() == reference->second.size() && g->second.front()->rank < reference->second.front()->rank)) {
      reference = g;
    }
  }
  auto who = [&](const std::vector<const RankInventory*>& group, std::vector<int>* named) {
    std::vector<int> ranks;
    std::string nodes;
    for (const RankInventory* s : group) {
      if (per_node) {
        for (int r : ranks_on(all, s->node)) ranks.push_back(r);
        nodes += (nodes.empty() ? "" : ", ") + s->node;
      } else {
        ranks.push_back(s->rank);
      }
    }
    std::sort(ranks.begin(), ranks.end());
    if (named) *named = ranks;
    if (per_node) return (group.size() == 1 ? "node " : "nodes ") + nodes + " (ranks " + format_ranges(ranks) + ")";
    return group.size() == 1 ? describe_rank(*group[0]) : "ranks " + format_ranges(ranks);
  };
  auto has = [](size_t n) { return n == 1 ? " has " : " have "; };
  const std::string reference_text = who(reference->second, nullptr) + has(reference->second.size()) +
                                     shown(reference->first);
  for (auto g = groups.begin(); g != groups.end(); ++g) {
    if (g == reference) continue;
    InventoryFinding f;
    f.item = item;
    const std::string named = who(g->second, &f.ranks);
    f.text = item + ": " + named + has(g->second.size()) + shown(g->first) + " where " + reference_text;
    out.push_back(f);
  }
}

}  // namespace

std::string sysfs_pci_address(const std::string& bus_id) {
  // domain:bus:device.function in hex, the domain 4 or 8 digits (NVML pads it to 8, sysfs to 4),
  // the device 5 bits, the function 3. Parsed by hand: sscanf's %x takes signs, spaces and "0x".
  auto hex = [&](size_t from, size_t digits, unsigned& value) {
    if (from + digits > bus_id.size()) return false;
    value = 0;
    for (size_t i = from; i < from + digits; ++i) {
      const char c = bus_id[i];
      if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
      value = value * 16 + static_cast<unsigned>(std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : std::tolower(c) - 'a' + 10);
    }
    return true;
  };
  const size_t domain_digits = bus_id.size() == 16 ? 8 : 4;
  const size_t b = domain_digits + 1, d = b + 3, f = d + 3;
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  if (bus_id.size() != f + 1 || bus_id[b - 1] != ':' || bus_id[d - 1] != ':' || bus_id[f - 1] != '.' ||
      !hex(0, domain_digits, domain) || !hex(b, 2, bus) || !hex(d, 2, device) || !hex(f, 1, function) ||
      domain > 0xffff || device > 0x1f || function > 7) {
    return "";
  }
  char text[16];
  std::snprintf(text, sizeof text, "%04x:%02x:%02x.%x", domain, bus, device, function);
  return text;
}

RankInventory read_inventory(const InventorySources& sources, const std::string& gpu_pci_bus_id, int sm_count) {
  RankInventory inv;
  read_cpus(sources.proc, inv);
  inv.numa_nodes = count_numa_nodes(sources.sysfs);
  inv.nics = read_nics(sources.sysfs);
  if (!gpu_pci_bus_id.empty()) read_gpu(sources, gpu_pci_bus_id, sm_count, inv);
  return inv;
}

std::string encode_inventory(const RankInventory& r) {
  std::ostringstream out;
  auto put = [&out](const std::string& key, const std::string& value) { out << key << '=' << one_line(value) << '\n'; };
  put("rank", std::to_string(r.rank));
  put("local_rank", std::to_string(r.local_rank));
  put("node", r.node);
  put("cpu_model", r.cpu_model);
  put("logical_cpus", std::to_string(r.logical_cpus));
  put("cores", std::to_string(r.cores));
  put("sockets", std::to_string(r.sockets));
  put("numa_nodes", std::to_string(r.numa_nodes));
  put("cpus_allowed", r.cpus_allowed);
  put("driver_version", r.driver_version);
  put("cuda_driver_version", r.cuda_driver_version);
  put("backend_version", r.backend_version);
  for (size_t i = 0; i < r.gpus.size(); ++i) {
    const GpuInventory& g = r.gpus[i];
    const std::string p = "gpu." + std::to_string(i) + ".";
    put(p + "name", g.name);
    put(p + "uuid", g.uuid);
    put(p + "pci_bus_id", g.pci_bus_id);
    put(p + "numa_node", std::to_string(g.numa_node));
    put(p + "memory_bytes", std::to_string(g.memory_bytes));
    put(p + "sm_count", std::to_string(g.sm_count));
    put(p + "sm_clock_max_mhz", std::to_string(g.sm_clock_max_mhz));
    put(p + "memory_clock_max_mhz", std::to_string(g.memory_clock_max_mhz));
    put(p + "pcie_width", std::to_string(g.pcie_width));
    put(p + "pcie_width_max", std::to_string(g.pcie_width_max));
    put(p + "pcie_gts", number(g.pcie_gts));
    put(p + "pcie_gts_max", number(g.pcie_gts_max));
  }
  for (size_t i = 0; i < r.nics.size(); ++i) {
    const std::string p = "nic." + std::to_string(i) + ".";
    put(p + "name", r.nics[i].name);
    put(p + "link_layer", r.nics[i].link_layer);
    put(p + "bits_per_second", number(r.nics[i].bits_per_second));
  }
  return out.str();
}

RankInventory decode_inventory(const std::string& text) {
  RankInventory r;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) throw Error(Error::Kind::invalid_argument, "inventory: malformed line " + line);
    const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    std::string field;
    if (key == "rank") parse_number(key, value, r.rank);
    else if (key == "local_rank") parse_number(key, value, r.local_rank);
    else if (key == "node") r.node = value;
    else if (key == "cpu_model") r.cpu_model = value;
    else if (key == "logical_cpus") parse_number(key, value, r.logical_cpus);
    else if (key == "cores") parse_number(key, value, r.cores);
    else if (key == "sockets") parse_number(key, value, r.sockets);
    else if (key == "numa_nodes") parse_number(key, value, r.numa_nodes);
    else if (key == "cpus_allowed") r.cpus_allowed = value;
    else if (key == "driver_version") r.driver_version = value;
    else if (key == "cuda_driver_version") r.cuda_driver_version = value;
    else if (key == "backend_version") r.backend_version = value;
    else if (key.rfind("gpu.", 0) == 0) {
      const size_t i = list_index(key, "gpu.", field);
      if (r.gpus.size() <= i) r.gpus.resize(i + 1);
      GpuInventory& g = r.gpus[i];
      if (field == "name") g.name = value;
      else if (field == "uuid") g.uuid = value;
      else if (field == "pci_bus_id") g.pci_bus_id = value;
      else if (field == "numa_node") parse_number(key, value, g.numa_node);
      else if (field == "memory_bytes") parse_number(key, value, g.memory_bytes);
      else if (field == "sm_count") parse_number(key, value, g.sm_count);
      else if (field == "sm_clock_max_mhz") parse_number(key, value, g.sm_clock_max_mhz);
      else if (field == "memory_clock_max_mhz") parse_number(key, value, g.memory_clock_max_mhz);
      else if (field == "pcie_width") parse_number(key, value, g.pcie_width);
      else if (field == "pcie_width_max") parse_number(key, value, g.pcie_width_max);
      else if (field == "pcie_gts") parse_number(key, value, g.pcie_gts);
      else if (field == "pcie_gts_max") parse_number(key, value, g.pcie_gts_max);
    } else if (key.rfind("nic.", 0) == 0) {
      const size_t i = list_index(key, "nic.", field);
      if (r.nics.size() <= i) r.nics.resize(i + 1);
      if (field == "name") r.nics[i].name = value;
      else if (field == "link_layer") r.nics[i].link_layer = value;
      else if (field == "bits_per_second") parse_number(key, value, r.nics[i].bits_per_second);
    }
  }
  return r;
}

std::vector<RankInventory> gather_inventories(Communicator& control, const RankInventory& mine) {
  const std::string text = encode_inventory(mine);
  int64_t length = static_cast<int64_t>(text.size());
  std::vector<int64_t> lengths(static_cast<size_t>(control.size()));
  control.all_gather(&length, lengths.data(), 1, DType::i64);
  const size_t slot = static_cast<size_t>(*std::max_element(lengths.begin(), lengths.end()));
  std::vector<char> padded(slot, '\0'), all(slot * lengths.size());
  std::copy(text.begin(), text.end(), padded.begin());
  control.all_gather(padded.data(), all.data(), slot, DType::u8);
  std::vector<RankInventory> ranks;
  for (size_t r = 0; r < lengths.size(); ++r) {
    ranks.push_back(decode_inventory(std::string(all.data() + r * slot, static_cast<size_t>(lengths[r]))));
  }
  return ranks;
}

std::vector<std::string> describe_inventory(const std::vector<RankInventory>& ranks,
                                            const std::vector<InventoryFinding>& findings) {
  std::vector<std::string> lines;
  std::set<std::string> seen;
  for (const auto& n : ranks) {
    if (!seen.insert(n.node).second) continue;
    auto count = [](int k, const char* what) { return std::to_string(k) + " " + what + (k == 1 ? "" : "s"); };
    std::string line = "node " + n.node + ", ranks " + format_ranges(ranks_on(ranks, n.node)) + ": " +
                       shown(n.cpu_model) + " (" + count(n.logical_cpus, "CPU") + ", " + count(n.cores, "core") + ", " +
                       count(n.sockets, "socket") + ", " + count(n.numa_nodes, "NUMA node") + ")";
    std::string nics;
    for (const auto& nic : n.nics) {
      nics += (nics.empty() ? "" : ", ") + nic.name + " " + nic.link_layer;
      if (nic.bits_per_second > 0) nics += " " + number(nic.bits_per_second / 1e9) + " Gbit/s";
    }
    lines.push_back(line + "; NICs: " + shown(nics));
  }
  for (const auto& r : ranks) {
    for (const auto& g : r.gpus) {
      char text[512];
      std::snprintf(text, sizeof text,
                    "rank %d (node %s): GPU %s %s, NUMA node %d, %.0f GiB, %d SMs, max clocks %u/%u MHz, "
                    "PCIe x%d of x%d at %g of %g GT/s; driver %s, CUDA %s",
                    r.rank, r.node.c_str(), shown(g.name).c_str(), shown(g.pci_bus_id).c_str(), g.numa_node,
                    static_cast<double>(g.memory_bytes) / (1ULL << 30), g.sm_count, g.sm_clock_max_mhz,
                    g.memory_clock_max_mhz, g.pcie_width, g.pcie_width_max, g.pcie_gts, g.pcie_gts_max,
                    shown(r.driver_version).c_str(), shown(r.cuda_driver_version).c_str());
      lines.push_back(text);
    }
  }
  for (const auto& f : findings) lines.push_back("inventory: " + f.text);
  return lines;
}

namespace {

// A value for `config` (results/SCHEMA.md: values hold no ';' or '='): those become ' '.
std::string config_safe(std::string value) {
  value = one_line(std::move(value));
  std::replace(value.begin(), value.end(), ';', ' ');
  std::replace(value.begin(), value.end(), '=', ' ');
  return value;
}

class ConfigText {
 public:
  void add(const std::string& key, const std::string& value) {
    if (value.empty()) return;
    text_ += (text_.empty() ? "" : ";") + key + "=" + config_safe(value);
  }
  void add(const std::string& key, double value) {
    if (value > 0) add(key, number(value));
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

const bool kInventoryCatalog = register_suite_info([] {
  SuiteInfo info;
  info.name = kInventorySuite;
  info.summary = "what every rank runs on, written by a run of the hardware suite (not a suite to name in dtsuite run)";
  info.metrics = {{"rank_info", "", "1 per rank; config: its node, CPU, NUMA, GPU, driver, CUDA"},
                  {"nic_speed", "bytes_per_second", "a node's network interface, its rated speed"}};
  return info;
}());

}  // namespace

std::vector<Record> inventory_records(const std::vector<RankInventory>& ranks,
                                      const std::vector<InventoryFinding>& findings) {
  std::vector<Record> out;
  auto row = [&](std::string case_id, std::string metric) {
    Record r;
    r.suite = kInventorySuite;
    r.case_id = std::move(case_id);
    r.metric = std::move(metric);
    return r;
  };
  for (const RankInventory& rank : ranks) {
    Record r = row("rank/" + std::to_string(rank.rank), "rank_info");
    ConfigText c;
    c.add("rank", std::to_string(rank.rank));
    c.add("local_rank", std::to_string(rank.local_rank));
    c.add("node", rank.node);
    c.add("cpu", rank.cpu_model);
    c.add("logical_cpus", rank.logical_cpus);
    c.add("cores", rank.cores);
    c.add("sockets", rank.sockets);
    c.add("numa_nodes", rank.numa_nodes);
    c.add("cpus_allowed", rank.cpus_allowed);
    c.add("driver", rank.driver_version);
    c.add("cuda_driver", rank.cuda_driver_version);
    std::string gpus;
    for (const GpuInventory& g : rank.gpus) {
      c.add("gpu", g.name);
      c.add("gpu_uuid", g.uuid);
      c.add("gpu_pci_bus_id", g.pci_bus_id);
      if (g.numa_node >= 0) c.add("gpu_numa_node", std::to_string(g.numa_node));
      c.add("gpu_memory_bytes", static_cast<double>(g.memory_bytes));
      c.add("gpu_sm_count", g.sm_count);
      c.add("gpu_sm_clock_max_mhz", g.sm_clock_max_mhz);
      c.add("gpu_memory_clock_max_mhz", g.memory_clock_max_mhz);
      c.add("pcie_width", g.pcie_width);
      c.add("pcie_width_max", g.pcie_width_max);
      c.add("pcie_gts", g.pcie_gts);
      c.add("pcie_gts_max", g.pcie_gts_max);
      break;  // one GPU per rank (the one its device backend takes)
    }
    r.labels.config = c.text();
    r.value = 1;
    r.detail = describe_rank(rank) + ": " + shown(rank.cpu_model) + ", CPUs " + shown(rank.cpus_allowed) +
               (rank.gpus.empty() ? "" : ", GPU " + shown(rank.gpus[0].name));
    out.push_back(std::move(r));
  }
  std::set<std::string> seen;
  for (const RankInventory& n : ranks) {
    if (!seen.insert(n.node).second) continue;
    for (const NicInventory& nic : n.nics) {
      Record r = row("node/" + n.node + "/nic/" + nic.name, "nic_speed");
      r.unit = "bytes_per_second";
      ConfigText c;
      c.add("node", n.node);
      c.add("ranks", format_ranges(ranks_on(ranks, n.node)));
      c.add("nic", nic.name);
      c.add("link_layer", nic.link_layer);
      r.labels.config = c.text();
      r.value = nic.bits_per_second > 0 ? nic.bits_per_second / 8 : std::nan("");
      if (nic.bits_per_second <= 0) r.detail = "the link does not say its speed (virtual, or down)";
      out.push_back(std::move(r));
    }
  }
  for (size_t i = 0; i < findings.size(); ++i) {
    Record r = row("mismatch/" + std::to_string(i + 1), "check");
    ConfigText c;
    c.add("item", findings[i].item);
    c.add("ranks", format_ranges(findings[i].ranks));
    r.labels.config = c.text();
    r.value = 0;
    r.verdict = Verdict::fail;
    r.detail = findings[i].text;
    out.push_back(std::move(r));
  }
  if (findings.empty()) {
    Record r = row("match", "check");
    r.value = 1;
    r.verdict = Verdict::pass;
    r.detail = "every part that should match does, on " + std::to_string(ranks.size()) +
               (ranks.size() == 1 ? " rank" : " ranks") + " and " + std::to_string(seen.size()) +
               (seen.size() == 1 ? " node" : " nodes") + " (rules: harness/inventory.h)";
    out.push_back(std::move(r));
  }
  return out;
}

std::string common_part(const std::vector<std::string>& part_of_rank) {
  std::map<std::string, std::vector<int>> ranks_of;
  for (size_t r = 0; r < part_of_rank.size(); ++r) ranks_of[part_of_rank[r]].push_back(static_cast<int>(r));
  if (ranks_of.size() == 1) return ranks_of.begin()->first;
  if (ranks_of.empty()) throw Error(Error::Kind::invalid_argument, "--profile auto: no ranks");
  std::string mixed;
  for (const auto& [name, ranks] : ranks_of) {
    mixed += (mixed.empty() ? "" : ", ") + std::string(ranks.size() == 1 ? "rank " : "ranks ") + format_ranges(ranks) +
             " on '" + name + "'";
  }
  throw Error(Error::Kind::invalid_argument, "--profile auto: the ranks run on different parts (" + mixed +
                                                 "), and one profile judges them all; name one with --profile FILE");
}

std::vector<InventoryFinding> inventory_findings(const std::vector<RankInventory>& ranks) {
  std::vector<InventoryFinding> out;
  auto gpu = [](const RankInventory& r) -> const GpuInventory* { return r.gpus.empty() ? nullptr : &r.gpus[0]; };
  auto per_rank = [&](const std::string& item, const std::function<std::string(const RankInventory&)>& value) {
    must_match(ranks, ranks, false, item, value, out);
  };
  per_rank("cpu_model", [](const RankInventory& r) { return r.cpu_model; });
  per_rank("driver_version", [](const RankInventory& r) { return r.driver_version; });
  per_rank("cuda_driver_version", [](const RankInventory& r) { return r.cuda_driver_version; });
  per_rank("backend_version", [](const RankInventory& r) { return r.backend_version; });
  per_rank("gpu_model", [&](const RankInventory& r) { return gpu(r) ? gpu(r)->name : ""; });
  auto gpu_number = [&](const char* item, auto field) {
    per_rank(item, [&](const RankInventory& r) {
      const GpuInventory* g = gpu(r);
      return g && g->*field ? std::to_string(g->*field) : "";
    });
  };
  gpu_number("gpu_memory_bytes", &GpuInventory::memory_bytes);
  gpu_number("gpu_sm_count", &GpuInventory::sm_count);
  gpu_number("gpu_sm_clock_max_mhz", &GpuInventory::sm_clock_max_mhz);
  gpu_number("gpu_memory_clock_max_mhz", &GpuInventory::memory_clock_max_mhz);
  gpu_number("gpu_pcie_width_max", &GpuInventory::pcie_width_max);
  for (const auto& r : ranks) {
    const GpuInventory* g = gpu(r);
    if (g && g->pcie_width > 0 && g->pcie_width_max > 0 && g->pcie_width < g->pcie_width_max) {
      out.push_back({"gpu_pcie_width", {r.rank},
                     "gpu_pcie_width: " + describe_rank(r) + " trained its PCIe link at x" + std::to_string(g->pcie_width) +
                         ", the part supports x" + std::to_string(g->pcie_width_max)});
    }
  }
  // Per node, by its lowest rank: what a node has is the same for every rank on it.
  std::vector<RankInventory> nodes;
  std::set<std::string> seen;
  for (const auto& r : ranks) {
    if (seen.insert(r.node).second) nodes.push_back(r);
  }
  auto node_number = [&](const char* item, int RankInventory::*field) {
    must_match(ranks, nodes, true, item, [&](const RankInventory& r) { return r.*field ? std::to_string(r.*field) : ""; },
               out);
  };
  node_number("logical_cpus", &RankInventory::logical_cpus);
  node_number("cores", &RankInventory::cores);
  node_number("sockets", &RankInventory::sockets);
  node_number("numa_nodes", &RankInventory::numa_nodes);
  // A NIC of one name and link layer on several nodes: one rated below the fastest is named.
  std::map<std::pair<std::string, std::string>, std::vector<std::pair<double, const RankInventory*>>> nics;
  for (const auto& n : nodes) {
    for (const auto& nic : n.nics) {
      if (nic.bits_per_second > 0) nics[{nic.name, nic.link_layer}].push_back({nic.bits_per_second, &n});
    }
  }
  for (const auto& [key, rated] : nics) {
    if (rated.size() < 2) continue;
    double fastest = 0;
    for (const auto& [bps, n] : rated) fastest = std::max(fastest, bps);
    for (const auto& [bps, n] : rated) {
      if (bps >= fastest) continue;
      const std::vector<int> on_node = ranks_on(ranks, n->node);
      out.push_back({"nic_speed", on_node,
                     "nic_speed: node " + n->node + " (ranks " + format_ranges(on_node) + ") rates " + key.first + " (" +
                         key.second + ") at " + number(bps / 1e9) + " Gbit/s, the fastest of its " +
                         std::to_string(rated.size() - 1) + " peers at " + number(fastest / 1e9) + " Gbit/s"});
    }
  }
  return out;
}

}  // namespace dts

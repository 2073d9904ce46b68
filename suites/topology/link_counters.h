// What the wire carried: the byte counters of this node's network interfaces
// (/sys/class/net/IF/statistics/{tx,rx}_bytes, the rated speed in /sys/class/net/IF/speed) and of
// its InfiniBand ports (/sys/class/infiniband/DEV/ports/N/counters/port_{xmit,rcv}_data, in
// units of 4 bytes; the rate in .../ports/N/rate), and of its GPUs' NVLinks where NVIDIA's
// management library can be loaded (NVML, opened at run time: a build without a GPU driver has
// none, and reads none). The loopback interface is left out: what it carries never leaves the node.
// No MPI here.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dts {

struct LinkCounter {
  int64_t tx_bytes = 0, rx_bytes = 0;
  double rated_bits_per_second = 0;  // 0: the link does not say (veth, a down link)
};

// Every interface and port of the node, by name ("eth0", "ib:mlx5_0/1", "nvlink:gpu0"). `sysfs` is
// the root of the sysfs tree ("/sys"; tests pass a folder of their own). Missing folders give an
// empty map. NVLinks come from read_nvlink_counters().
std::map<std::string, LinkCounter> read_link_counters(const std::string& sysfs = "/sys");

// Each GPU's NVLink traffic (NVML's NVLINK_THROUGHPUT_DATA_TX and _RX fields, KiB, all links of
// the GPU together) and rated speed (the common link speed, MB/s, times the link count), as
// "nvlink:gpu<i>". The library is `library`, else $DTS_NVML_LIBRARY, else libnvidia-ml.so.1;
// none that loads (no driver) gives an empty map, as does a GPU without NVLink.
std::map<std::string, LinkCounter> read_nvlink_counters(const std::string& library = "");

// Traffic between two readings: per link, the bytes sent (tx) and received (rx) in between.
std::map<std::string, LinkCounter> link_traffic(const std::map<std::string, LinkCounter>& before,
                                                const std::map<std::string, LinkCounter>& after);

// "1gbit", "10G", "100Gbit", "25000M", "1e9" (bits per second; K, M, G, T are powers of 1000, as
// link speeds are): bits per second. Error{invalid_argument} for anything else or a rate <= 0.
double parse_link_speed(const std::string& text);

}  // namespace dts

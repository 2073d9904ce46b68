// Collective descriptors: names, shapes, byte counts, bus-bandwidth factors (DESIGN.md).
#include "suites/collectives/collective.h"

#include <string>

#include "core/error.h"

namespace dts {

std::string_view name(Collective c) {
  switch (c) {
    case Collective::all_reduce: return "all_reduce";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::all_gather: return "all_gather";
    case Collective::broadcast: return "broadcast";
    case Collective::reduce: return "reduce";
    case Collective::all_to_all: return "all_to_all";
    case Collective::send_recv: return "send_recv";
  }
  return "?";
}

Collective parse_collective(std::string_view text) {
  for (Collective c : kAllCollectives) {
    if (text == name(c)) return c;
  }
  throw Error(Error::Kind::invalid_argument,
              "unknown collective '" + std::string(text) +
                  "' (expected all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all, send_recv)");
}

bool is_reducing(Collective c) {
  return c == Collective::all_reduce || c == Collective::reduce_scatter || c == Collective::reduce;
}

bool is_rooted(Collective c) { return c == Collective::broadcast || c == Collective::reduce; }

bool count_is_per_rank(Collective c) {
  return c == Collective::reduce_scatter || c == Collective::all_gather || c == Collective::all_to_all;
}

int64_t collective_bytes(Collective c, int64_t count, int64_t element_size, int world_size) {
  return count * element_size * (count_is_per_rank(c) ? world_size : 1);
}

double bus_bandwidth_factor(Collective c, int world_size) {
  const double n = world_size;
  switch (c) {
    case Collective::all_reduce: return 2.0 * (n - 1) / n;
    case Collective::reduce_scatter:
    case Collective::all_gather:
    case Collective::all_to_all: return (n - 1) / n;
    case Collective::broadcast:
    case Collective::reduce:
    case Collective::send_recv: return 1.0;
  }
  return 1.0;
}

}  // namespace dts

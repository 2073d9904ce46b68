// One small descriptor per collective (the nccl-tests way): its name, whether it reduces or
// takes a root, how its byte count relates to element counts, and its bus-bandwidth factor.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>

namespace dts {

enum class Collective : uint8_t { all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all, send_recv };

inline constexpr std::array<Collective, 7> kAllCollectives{
    Collective::all_reduce, Collective::reduce_scatter, Collective::all_gather, Collective::broadcast,
    Collective::reduce,     Collective::all_to_all,     Collective::send_recv};

std::string_view name(Collective c);
Collective parse_collective(std::string_view text);  // Error{invalid_argument}
bool is_reducing(Collective c);
bool is_rooted(Collective c);
// True when the API count is per rank and the buffer holds count * n elements
// (reduce_scatter's output, all_gather's input, all_to_all's block per peer).
bool count_is_per_rank(Collective c);

// nccl-tests' byte count of one operation: the full buffer (count * n elements) for
// all_gather, reduce_scatter and all_to_all, count elements otherwise.
int64_t collective_bytes(Collective c, int64_t count, int64_t element_size, int world_size);

// busbw = algbw * factor: 2(n-1)/n for all_reduce; (n-1)/n for all_gather, reduce_scatter and
// all_to_all; 1 for broadcast, reduce and send_recv. It turns algorithm bandwidth into the
// bandwidth each rank's link must carry, comparable across rank counts and to the link's rate.
double bus_bandwidth_factor(Collective c, int world_size);

}  // namespace dts

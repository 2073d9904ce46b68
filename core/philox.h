// Philox4x32-10 counter-based RNG (Salmon et al., SC'11): the value at (key, counter) is a pure
// function, so any rank can generate any element (inputs, parameter shards) with no communication.
#pragma once
#include <array>
#include <cstdint>

namespace dts {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

constexpr PhiloxCounter philox4x32_10(PhiloxCounter ctr, PhiloxKey key) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kW0;
      key[1] += kW1;
    }
    const uint64_t p0 = uint64_t{kM0} * ctr[0];
    const uint64_t p1 = uint64_t{kM1} * ctr[2];
    ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(p0)};
  }
  return ctr;
}

// 64 random bits for (seed, stream, index): stream separates users of one seed (a rank, a
// parameter name's hash), index is the element.
constexpr uint64_t philox_bits(uint64_t seed, uint64_t stream, uint64_t index) {
  const PhiloxCounter out = philox4x32_10(
      {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), static_cast<uint32_t>(stream),
       static_cast<uint32_t>(stream >> 32)},
      {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  return (uint64_t{out[0]} << 32) | out[1];
}

// Uniform double in [0, 1) with 53 random bits.
constexpr double philox_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  return static_cast<double>(philox_bits(seed, stream, index) >> 11) * 0x1.0p-53;
}

}  // namespace dts

// Whether a training workload fits the memory of the ranks that run it, decided in a suite's
// plan() before anything is allocated: a model too large for the node is a set-up error (exit 2)
// with one line saying how many bytes a rank needs, not a std::bad_alloc in every case. Shared
// by the suites that train the MLP of the training flags (equivalence, scaling).
#pragma once
#include <cstdint>
#include <string>

#include "strategies/workload.h"

namespace dts {

// What one rank may allocate, and where the figure comes from ("MemAvailable 22.4 GB shared by 2
// ranks", "ulimit -v leaves 1.2 GB"): the node's available memory over the ranks that share it,
// or the process's address-space or data limit beyond what it already uses, whichever is less.
struct MemoryAvailable {
  double bytes = 0;
  std::string source;
};
MemoryAvailable memory_available_per_rank(int ranks_on_node);

// A lower bound of the bytes one rank holds to train `spec` on `batch_rows` rows in one process:
// `bytes_per_parameter` times the parameters (the suite's own count of the copies it keeps), the
// batch's inputs (f64), and every layer's outputs (f32 at least, kept for the backward pass).
double training_bytes_at_least(const ModelSpec& spec, int64_t batch_rows, double bytes_per_parameter);

// Throws Error{invalid_argument} with one line when `needed` exceeds `available`: "<what> needs
// at least N bytes per rank (<how>) and ... : <remedy>, or run on more memory".
inline constexpr const char* kLowerTheModel = "lower --width, --layers or --batch";
void check_fits(const std::string& what, double needed, const std::string& how, const MemoryAvailable& available,
                const std::string& remedy = kLowerTheModel);

// "a 3-layer MLP of width 100000 (10,003,300,010 parameters)", for the line check_fits writes.
std::string describe_model(const ModelSpec& spec);

// "10.3 GB": bytes in decimal units, three significant digits.
std::string format_bytes(double bytes);

}  // namespace dts

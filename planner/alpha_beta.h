// The planner's communication model: t(bytes) = alpha + bytes / beta (Hockney's latency-bandwidth
// model), fitted to measured times of one collective on one group shape (or of one link class's
// point-to-point messages), piecewise where the library changes algorithm with size (NCCL's LL,
// LL128 and Simple protocols, MPI's eager and rendezvous: each a line of its own over a range of
// sizes). Every piece reports its residuals, so a user sees how well the line holds where it is
// used.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dts::planner {

// The times a fit takes, in seconds: a clock's readings. No clock resolves a femtosecond (the
// topology sweep's times, cut to 1/1000 of a nanosecond clock's reading at the least, stay above
// it), and no run has measured 1e9 s (32 years). Within them the fit's sums (1/t^2 times sizes^2)
// stay finite for every size a run moves; outside, 1e200 s made the weights 0 and priced every
// call at 0 s.
inline constexpr double kShortestFitTime = 1e-15, kLongestFitTime = 1e9;

// One measurement: a call moving `bytes` took `seconds` (kShortestFitTime .. kLongestFitTime).
struct TimedSize {
  double bytes = 0;
  double seconds = 0;
};

// One line over a range of measured sizes.
struct AlphaBetaPiece {
  double first_bytes = 0, last_bytes = 0;  // the smallest and largest measured size it covers
  double alpha = 0;                        // seconds: the time of an empty call
  double inverse_beta = 0;                 // seconds per byte (1 / bandwidth; 0: no size term)
  int points = 0;                          // measurements fitted
  int sizes = 0;                           // distinct sizes among them
  double max_residual = 0;                 // largest |predicted / measured - 1| over its points
  double rms_residual = 0;                 // root mean square of predicted / measured - 1
  double seconds(double bytes) const { return alpha + bytes * inverse_beta; }
  // Bytes per second (infinite when inverse_beta is 0).
  double beta() const;
};

struct AlphaBetaFit {
  std::vector<AlphaBetaPiece> pieces;  // by size, contiguous, at least one
  // The prediction of the piece whose range holds `bytes`; between two pieces' measured sizes
  // the upper one's (a library switches algorithm at some size in that gap), below the first
  // the first's, above the last the last's: outside [first, last] it is an extrapolation.
  double seconds(double bytes) const;
  // The piece whose line seconds(bytes) takes.
  const AlphaBetaPiece& piece(double bytes) const;
  bool covers(double bytes) const { return bytes >= pieces.front().first_bytes && bytes <= pieces.back().last_bytes; }
  double max_residual() const;
  // "alpha 5.1 us, beta 10.2 GB/s over 8 bytes-65.5 kB (6 sizes, residual max 2.1%); ..."
  std::string describe() const;
};

// Fits `points` (any order; a size may repeat). Each piece's alpha and 1/beta minimize the sum of
// squared relative errors, sum ((alpha + x / beta - t) / t)^2 (times span orders of magnitude
// across sizes; an absolute error would leave the small sizes unfitted), each held >= 0 (a
// negative latency or bandwidth is no model: the best fit with that term at 0 is taken instead).
// Breakpoints fall between distinct sizes; up to `max_pieces` pieces of at least `min_sizes`
// distinct sizes each, their number chosen by the Bayesian information criterion
// n ln(RSS / n) + (3k - 1) ln n (two parameters per piece, k - 1 breakpoints), so a piece is
// added only where a change of slope stands out of the noise. A relative RSS below 1e-12 per
// point (timer resolution) counts as 1e-12, so exact data is not split to fit rounding.
// Error{invalid_argument} for fewer than two distinct sizes ("needs at least two distinct sizes,
// got 1 (8 B)") or more than 1,024, a time outside kShortestFitTime .. kLongestFitTime or not a
// number, a size < 0 or not finite, a size over its time above 1e140 per second (its square
// would overflow the sums), max_pieces < 1 or min_sizes < 2.
AlphaBetaFit fit_alpha_beta(std::vector<TimedSize> points, int max_pieces = 3, int min_sizes = 3);

}  // namespace dts::planner

// Piecewise alpha-beta fits (alpha_beta.h): weighted least squares per piece, breakpoints by
// dynamic programming, the number of pieces by BIC.
#include "planner/alpha_beta.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <utility>

#include "core/error.h"
#include "results/record.h"  // format_number
#include "suites/memory_fit.h"  // format_bytes

namespace dts::planner {

namespace {

// Relative RSS per point below which a fit counts as exact (timer resolution, ~1e-6 relative).
constexpr double kResolutionRss = 1e-12;
constexpr size_t kMaxSizes = 1024;
constexpr double kMaxSizePerTime = 1e140;  // sizes (bytes, FLOPs) per second; see fit_alpha_beta

struct Line {
  double alpha = 0, inverse_beta = 0, rss = 0;
};

double relative_rss(const TimedSize* p, size_t n, double alpha, double inverse_beta) {
  double rss = 0;
  for (size_t i = 0; i < n; ++i) {
    const double r = (alpha + p[i].bytes * inverse_beta) / p[i].seconds - 1;
    rss += r * r;
  }
  return rss;
}

// min sum w (alpha + b x - t)^2, w = 1 / t^2, alpha >= 0, b >= 0: the unconstrained solution of
// the 2 x 2 normal equations, else the better of the two one-term fits. (GSL's gsl_fit_wlinear
// solves the same system; it would be this project's only use of GSL.)
Line fit_line(const TimedSize* p, size_t n) {
  double s0 = 0, s1 = 0, s2 = 0, t0 = 0, t1 = 0;
  for (size_t i = 0; i < n; ++i) {
    const double w = 1 / (p[i].seconds * p[i].seconds), x = p[i].bytes, t = p[i].seconds;
    s0 += w;
    s1 += w * x;
    s2 += w * x * x;
    t0 += w * t;
    t1 += w * x * t;
  }
  Line line;
  const double det = s0 * s2 - s1 * s1;
  bool feasible = false;
  if (det > 1e-12 * s0 * s2) {  // two distinct sizes at least (det is 0 for one)
    line.alpha = (t0 * s2 - t1 * s1) / det;
    line.inverse_beta = (s0 * t1 - s1 * t0) / det;
    feasible = line.alpha >= 0 && line.inverse_beta >= 0;
  }
  if (!feasible) {
    const Line latency_only{t0 / s0, 0, 0};
    const Line bandwidth_only{0, s2 > 0 ? t1 / s2 : 0, 0};
    const double a = relative_rss(p, n, latency_only.alpha, 0);
    const double b = s2 > 0 ? relative_rss(p, n, 0, bandwidth_only.inverse_beta) : std::numeric_limits<double>::infinity();
    line = a <= b ? latency_only : bandwidth_only;
  }
  line.rss = relative_rss(p, n, line.alpha, line.inverse_beta);
  return line;
}

}  // namespace

double AlphaBetaPiece::beta() const {
  return inverse_beta > 0 ? 1 / inverse_beta : std::numeric_limits<double>::infinity();
}

const AlphaBetaPiece& AlphaBetaFit::piece(double bytes) const {
  for (const AlphaBetaPiece& p : pieces) {
    if (bytes <= p.last_bytes) return p;
  }
  return pieces.back();
}

double AlphaBetaFit::seconds(double bytes) const { return piece(bytes).seconds(bytes); }

double AlphaBetaFit::max_residual() const {
  double worst = 0;
  for (const AlphaBetaPiece& piece : pieces) worst = std::max(worst, piece.max_residual);
  return worst;
}

std::string AlphaBetaFit::describe() const {
  static const char* const time_units[] = {"s", "ms", "us", "ns"};
  std::string text;
  for (const AlphaBetaPiece& p : pieces) {
    if (!text.empty()) text += "; ";
    // Seconds in the largest unit that keeps the number at least 1.
    double alpha = p.alpha;
    int u = 0;
    while (u < 3 && alpha != 0 && std::fabs(alpha) < 1) {
      alpha *= 1000;
      ++u;
    }
    char line[256], beta[64];
    if (p.inverse_beta > 0) {
      std::snprintf(beta, sizeof beta, "%.3g GB/s", p.beta() / 1e9);
    } else {
      std::snprintf(beta, sizeof beta, "unbounded");
    }
    std::snprintf(line, sizeof line, "alpha %.3g %s, beta %s over %s-%s (%d sizes, residual max %.1f%%)", alpha,
                  time_units[u], beta, format_bytes(p.first_bytes).c_str(), format_bytes(p.last_bytes).c_str(), p.sizes,
                  100 * p.max_residual);
    text += line;
  }
  return text;
}

AlphaBetaFit fit_alpha_beta(std::vector<TimedSize> points, int max_pieces, int min_sizes) {
  const auto refuse = [](const std::string& why) { return Error(Error::Kind::invalid_argument, "alpha-beta fit: " + why); };
  if (max_pieces < 1 || min_sizes < 2) throw refuse("needs max_pieces >= 1 and min_sizes >= 2");
  for (const TimedSize& p : points) {
    if (!(p.seconds >= kShortestFitTime && p.seconds <= kLongestFitTime)) {
      throw refuse("a time of " + format_number(p.seconds) + " s, outside what a clock reads (" +
                   format_number(kShortestFitTime) + " .. " + format_number(kLongestFitTime) + " s)");
    }
    if (!(p.bytes >= 0) || !std::isfinite(p.bytes)) throw refuse("a size of " + format_number(p.bytes) + " bytes");
    // The sums hold (size / time)^2 per point: kept below 1e280, so that even 1e20 points stay
    // finite (1e300 bytes in 1 s made them infinite and the line a constant).
    if (!(p.bytes / p.seconds <= kMaxSizePerTime)) {
      throw refuse("a size of " + format_number(p.bytes) + " in " + format_number(p.seconds) + " s overflows the sums");
    }
  }
  std::sort(points.begin(), points.end(), [](const TimedSize& a, const TimedSize& b) {
    return a.bytes < b.bytes || (a.bytes == b.bytes && a.seconds < b.seconds);
  });
  // starts[i]: the first point of the i-th distinct size; starts[m] = n.
  std::vector<size_t> starts;
  for (size_t i = 0; i < points.size(); ++i) {
    if (i == 0 || points[i].bytes != points[i - 1].bytes) starts.push_back(i);
  }
  const size_t m = starts.size(), n = points.size();
  if (m < 2) {
    throw refuse("needs at least two distinct sizes, got " + std::to_string(m) +
                 (m == 1 ? " (" + format_bytes(points.front().bytes) + ")" : ""));
  }
  // The breakpoint search holds m^2 lines: a sweep of sizes has tens (nccl-tests' -f 2 from 8 B
  // to 16 GiB: 32), never thousands.
  if (m > kMaxSizes) throw refuse(std::to_string(m) + " distinct sizes, more than " + std::to_string(kMaxSizes));
  starts.push_back(n);

  // cost(i, j): the best line over sizes [i, j).
  std::map<std::pair<size_t, size_t>, Line> lines;
  const auto line_of = [&](size_t i, size_t j) -> const Line& {
    const auto [at, inserted] = lines.try_emplace({i, j});
    if (inserted) at->second = fit_line(points.data() + starts[i], starts[j] - starts[i]);
    return at->second;
  };
  const auto min_width = static_cast<size_t>(min_sizes);
  const double infinity = std::numeric_limits<double>::infinity();
  // best[k][j]: least RSS of sizes [0, j) in k pieces; from[k][j]: where its last piece starts.
  const size_t most = static_cast<size_t>(max_pieces);
  std::vector<std::vector<double>> best(most + 1, std::vector<double>(m + 1, infinity));
  std::vector<std::vector<size_t>> from(most + 1, std::vector<size_t>(m + 1, 0));
  best[0][0] = 0;
  for (size_t k = 1; k <= most; ++k) {
    for (size_t j = 1; j <= m; ++j) {
      for (size_t i = 0; i < j; ++i) {
        // One piece may be narrower than min_sizes only when it is the whole fit (two sizes).
        if (j - i < min_width && !(k == 1 && i == 0 && j == m)) continue;
        if (best[k - 1][i] == infinity) continue;
        const double cost = best[k - 1][i] + line_of(i, j).rss;
        if (cost < best[k][j]) {
          best[k][j] = cost;
          from[k][j] = i;
        }
      }
    }
  }
  size_t pieces = 1;
  double best_bic = infinity;
  const auto count = static_cast<double>(n);
  for (size_t k = 1; k <= most; ++k) {
    if (best[k][m] == infinity) continue;
    const double rss = std::max(best[k][m], kResolutionRss * count);
    const double bic = count * std::log(rss / count) + (3.0 * static_cast<double>(k) - 1) * std::log(count);
    if (bic < best_bic - 1e-9) {
      best_bic = bic;
      pieces = k;
    }
  }
  AlphaBetaFit fit;
  size_t j = m;
  for (size_t k = pieces; k >= 1; --k) {
    const size_t i = from[k][j];
    const Line& line = line_of(i, j);
    AlphaBetaPiece piece;
    piece.first_bytes = points[starts[i]].bytes;
    piece.last_bytes = points[starts[j] - 1].bytes;
    piece.alpha = line.alpha;
    piece.inverse_beta = line.inverse_beta;
    piece.points = static_cast<int>(starts[j] - starts[i]);
    piece.sizes = static_cast<int>(j - i);
    double squares = 0;
    for (size_t p = starts[i]; p < starts[j]; ++p) {
      const double r = piece.seconds(points[p].bytes) / points[p].seconds - 1;
      piece.max_residual = std::max(piece.max_residual, std::fabs(r));
      squares += r * r;
    }
    piece.rms_residual = std::sqrt(squares / piece.points);
    fit.pieces.insert(fit.pieces.begin(), piece);
    j = i;
  }
  return fit;
}

}  // namespace dts::planner

// Replay classes priced by the planner's fits (planner/replay_prediction.h).
#include "planner/replay_prediction.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"

namespace dts::planner {

std::map<std::string, double> ReplayPredictions::median_abs_error() const {
  std::map<std::string, std::vector<double>> errors;
  for (const ReplayClassPrediction& p : priced) errors[p.op].push_back(std::abs(p.error()));
  std::map<std::string, double> medians;
  for (auto& [op, e] : errors) {
    std::sort(e.begin(), e.end());
    const size_t n = e.size();
    medians[op] = n % 2 ? e[n / 2] : (e[n / 2 - 1] + e[n / 2]) / 2;
  }
  return medians;
}

ReplayPredictions predict_replay(const std::vector<Record>& replay, const Measurements& measurements) {
  static const std::set<std::string> kCollectives{"all_reduce", "reduce_scatter", "all_gather",
                                                  "broadcast",  "reduce",         "all_to_all", "send_recv"};
  ReplayPredictions out;
  for (const Record& r : replay) {
    if (r.suite != "replay" || r.metric != "time" || r.verdict == Verdict::skip || r.value <= 0) continue;
    const std::string& op = r.labels.op;
    const std::string why_not = op == "barrier"       ? "a barrier is not measured"
                                : op == "all_to_allv" ? "uneven splits: the all_to_all fit prices even blocks only"
                                : r.labels.dtype == "bytes" ? "bytes only: the trace has no dtype to look the fit up by"
                                                            : "";
    if (!why_not.empty()) {
      out.unpriced.push_back(r.case_id + ": " + why_not);
      continue;
    }
    ReplayClassPrediction p;
    p.case_id = r.case_id;
    p.op = op;
    p.dtype = r.labels.dtype;
    p.bytes = r.labels.bytes;
    p.shape = GroupShape{r.labels.world_size, std::max(1, r.labels.nodes), r.labels.ranks_per_node}.normalized();
    p.measured = r.value;
    try {
      if (op == "send" || op == "recv") {
        const std::string_view link = p.shape.nodes > 1 ? kOtherNode : kSameNode;
        p.predicted = measurements.link(link).seconds(static_cast<double>(p.bytes));
        p.basis = "one-way " + std::string(link) + " messages";
      } else if (kCollectives.count(op)) {
        std::string from;
        try {
          p.predicted = measurements.collective(op, p.dtype, p.shape).seconds(static_cast<double>(p.bytes));
          p.basis = op + " " + p.dtype + " on " + p.shape.text();
        } catch (const Error&) {
          const auto extended = measurements.extended(op, p.dtype, p.shape, from);
          if (!extended) throw;
          p.predicted = extended->seconds(static_cast<double>(p.bytes));
          p.basis = from;  // "all_reduce f32 on 2 ranks on 1 node: extended from 4 ranks ... by the ring model"
        }
      } else {
        out.unpriced.push_back(r.case_id + ": no fit for " + op);
        continue;
      }
    } catch (const Error& e) {
      out.unpriced.push_back(r.case_id + ": " + e.what());
      continue;
    }
    out.priced.push_back(std::move(p));
  }
  return out;
}

}  // namespace dts::planner

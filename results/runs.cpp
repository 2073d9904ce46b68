// Joining runs for compare: a file's rows as runs (run_id, repetition), what the gate does not
// read let go of, each run given once, and the stack each run is of (one stack per comparison).
#include "results/runs.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "core/error.h"

namespace dts {

namespace {

// "backend 'mpi' (baseline) vs 'ring(mpi)' (current), world_size 4 vs 2"
std::string stack_difference(const JobStack& b, const JobStack& c) {
  std::string text;
  const auto add = [&](const char* field, const std::string& bv, const std::string& cv, bool quote) {
    if (bv == cv) return;
    const std::string q = quote ? "'" : "";
    text += (text.empty() ? "" : ", ") + std::string(field) + " " + q + bv + q + " (baseline) vs " + q + cv + q +
            " (current)";
  };
  add("backend", b.backend, c.backend, true);
  add("device", b.device, c.device, true);
  add("world_size", std::to_string(b.world_size), std::to_string(c.world_size), false);
  add("nodes", std::to_string(b.nodes), std::to_string(c.nodes), false);
  add("ranks_per_node", std::to_string(b.ranks_per_node), std::to_string(c.ranks_per_node), false);
  add("mpi_config", b.mpi_config, c.mpi_config, true);
  return text;
}

// job_stacks, a row at a time: the rows of several runs need not sit in one vector.
class StackCollector {
 public:
  void add(const Record& r) {
    const Labels& l = r.labels;
    const int size = job_size(r);
    const auto [it, added] = job_of_.try_emplace({r.run_id, l.backend, l.device, l.mpi_config, size}, jobs_.size());
    if (added) jobs_.push_back({l.backend, l.device, l.mpi_config, size, 0, 0});
    JobStack& job = jobs_[it->second];
    job.nodes = std::max(job.nodes, l.nodes);
    job.ranks_per_node = std::max(job.ranks_per_node, l.ranks_per_node);
  }
  std::vector<JobStack> stacks() const {
    std::vector<JobStack> stacks;  // two runs of one stack are one stack
    for (const JobStack& job : jobs_) {
      if (std::find(stacks.begin(), stacks.end(), job) == stacks.end()) stacks.push_back(job);
    }
    return stacks;
  }

 private:
  std::vector<JobStack> jobs_;
  std::map<std::tuple<std::string, std::string, std::string, std::string, int>, size_t> job_of_;
};

std::vector<JobStack> stacks_of(const std::vector<RecordedRun>& runs) {
  StackCollector collector;
  for (const RecordedRun& run : runs) {
    for (const Record& r : run.rows) collector.add(r);
  }
  return collector.stacks();
}

}  // namespace

// Comparing two different stacks with a regression gate would blame the code for the hardware;
// `report` is the tool for comparing stacks side by side.
void check_same_stack(const std::vector<RecordedRun>& baselines, const std::vector<RecordedRun>& currents) {
  const std::vector<JobStack> b = stacks_of(baselines), c = stacks_of(currents);
  if (b.empty()) throw Error(Error::Kind::invalid_argument, "the baseline has no rows to compare against");
  if (c.empty()) throw Error(Error::Kind::invalid_argument, "the current run has no rows");
  for (const JobStack& s : b) {
    if (std::find(c.begin(), c.end(), s) == c.end()) {
      throw Error(Error::Kind::invalid_argument, "the runs are of different stacks: " + stack_difference(s, c.front()) +
                                                     "; compare runs of one stack (use `dtsuite report` to set stacks side by side)");
    }
  }
  for (const JobStack& s : c) {
    if (std::find(b.begin(), b.end(), s) == b.end()) {
      throw Error(Error::Kind::invalid_argument, "the runs are of different stacks: " + stack_difference(b.front(), s) +
                                                     "; compare runs of one stack (use `dtsuite report` to set stacks side by side)");
    }
  }
}


std::vector<JobStack> job_stacks(const std::vector<Record>& records) {
  StackCollector collector;
  for (const Record& r : records) collector.add(r);
  return collector.stacks();
}

std::vector<RecordedRun> split_runs(std::vector<Record>&& rows, const std::string& source) {
  // Each run's rows counted first, so each vector is made at its size: no spare room held for
  // every run of a long history (shrink_to_fit would move each run once more).
  std::vector<RecordedRun> runs;
  std::vector<size_t> run_of(rows.size()), sizes;
  std::map<std::pair<std::string, int>, size_t> index;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto [it, added] = index.try_emplace({rows[i].run_id, rows[i].repetition}, runs.size());
    if (added) {
      runs.push_back({source, {}});
      sizes.push_back(0);
    }
    run_of[i] = it->second;
    ++sizes[it->second];
  }
  for (size_t k = 0; k < runs.size(); ++k) runs[k].rows.reserve(sizes[k]);
  for (size_t i = 0; i < rows.size(); ++i) runs[run_of[i]].rows.push_back(std::move(rows[i]));
  return runs;
}

std::vector<RecordedRun> split_runs(const std::vector<Record>& rows, const std::string& source) {
  return split_runs(std::vector<Record>(rows), source);
}

namespace {

// Frees the heap a value holds (clear() keeps a string's or vector's capacity).
template <typename T>
void release(T& value) {
  T().swap(value);
}

}  // namespace

void release_unread(RecordedRun& run, bool numbers_only, bool use_samples) {
  for (Record& r : run.rows) {
    if (!use_samples || numbers_only) release(r.samples);
    if (!numbers_only) continue;
    // Of an earlier baseline run compare_core never sees a row: only the between-run numbers
    // (join key, value, stats, verdict), the stack (job_stacks) and the identity are read.
    release(r.detail);
    release(r.timestamp);
    release(r.labels.host);
    release(r.labels.backend_version);
    release(r.labels.mpi_version);
    release(r.seed);
  }
}

namespace {

using RunIdentity = std::pair<std::string, int>;  // (run_id, repetition)

RunIdentity identity_of(const RecordedRun& run) { return {run.rows.front().run_id, run.rows.front().repetition}; }

// "run R (repetition 2)"
std::string run_text(const RunIdentity& id) { return "run " + id.first + " (repetition " + std::to_string(id.second) + ")"; }

// "in a.csv and b.csv", "in a.csv twice" (empty for runs from no file: the overload for one run a
// side); `twice` says "twice" where both are one file.
std::string in_sources(const RecordedRun& first, const RecordedRun& second, bool twice) {
  if (first.source.empty()) return "";
  if (first.source == second.source) return "in " + first.source + (twice ? " twice" : "");
  return "in " + first.source + " and " + second.source;
}

std::string with_space(const std::string& text) { return text.empty() ? "" : " " + text; }

}  // namespace

void check_distinct_runs(const std::vector<RecordedRun>& baselines, const std::vector<RecordedRun>& currents) {
  // Copies of one run add nothing about how runs differ, only the look of agreement: the spread
  // between runs shrinks and every change looks significant.
  std::map<RunIdentity, const RecordedRun*> baseline_runs, current_runs;
  for (const RecordedRun& run : baselines) {
    if (run.rows.empty()) continue;
    const auto [it, added] = baseline_runs.try_emplace(identity_of(run), &run);
    if (!added) {
      throw Error(Error::Kind::invalid_argument, run_text(it->first) + " is" + with_space(in_sources(*it->second, run, true)) +
                                                     ": give each baseline run once");
    }
  }
  for (const RecordedRun& run : currents) {  // split_runs gives each once; a caller might not
    if (run.rows.empty()) continue;
    const auto [it, added] = current_runs.try_emplace(identity_of(run), &run);
    if (!added) {
      throw Error(Error::Kind::invalid_argument, "the current " + run_text(it->first) + " is" +
                                                     with_space(in_sources(*it->second, run, true)) + ": give it once");
    }
  }
  // `compare a.csv a.csv`, or a copy of the current file as the baseline: nothing but the
  // current run on the baseline side.
  const bool nothing_else = std::all_of(baseline_runs.begin(), baseline_runs.end(),
                                        [&](const auto& entry) { return current_runs.count(entry.first) > 0; });
  for (const RecordedRun& run : currents) {
    if (run.rows.empty()) continue;
    const RunIdentity id = identity_of(run);
    const auto found = baseline_runs.find(id);
    if (found == baseline_runs.end()) continue;
    const RecordedRun& baseline = *found->second;
    if (nothing_else) {
      throw Error(Error::Kind::invalid_argument, "the baseline and the current run are the same run (run " + id.first +
                                                     ", repetition " + std::to_string(id.second) +
                                                     (baseline.source.empty() ? "" : ", " + in_sources(baseline, run, false)) +
                                                     "): a run cannot be its own baseline");
    }
    throw Error(Error::Kind::invalid_argument,
                "the current " + run_text(id) + (run.source.empty() ? "" : " in " + run.source) +
                    " is also among the baselines" + (baseline.source.empty() ? "" : " (in " + baseline.source + ")") +
                    ": a run cannot be its own baseline");
  }
}

std::string join_key(const Record& r, std::string_view metric) {
  const Labels& l = r.labels;
  std::string key;
  for (std::string_view part : {std::string_view(r.suite), std::string_view(r.case_id), metric, std::string_view(l.op),
                                std::string_view(l.dtype), std::string_view(l.placement), std::string_view(l.strategy),
                                std::string_view(l.config)}) {
    key += part;
    key += '\x1f';  // unit separator: appears in no field
  }
  key += std::to_string(l.bytes) + '\x1f' + std::to_string(l.world_size);
  return key;
}


}  // namespace dts

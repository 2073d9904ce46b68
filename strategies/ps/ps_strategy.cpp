// Parameter-server strategies (ps_strategy.h): the servers' protocol, the workers' step, the log
// and its replay.
//
// Messages (point to point, in posting order between each pair, so no tags are needed):
//   worker -> server j: a header of 4 + S int64 (step, batch first row, batch rows, the loss's
//                       bits, then the version of every server's range the gradient was computed
//                       on) and the gradient's range j; before the parameters are read (a pause
//                       between steps, or the end), one more header and payload: the pause marker
//                       (quiesce()).
//   server j -> worker: one int64 (the version of range j it sends) and range j.
// A server keeps one receive of each kind posted per worker while steps run, and the pause markers
// match the last ones, so it never leaves a receive behind (an MPI request in flight would keep the backend
// waiting). The server decides from what it counted and sent, never from a header's content: the
// headers go to the log, for the audit.
#include "strategies/ps/ps_strategy.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <map>
#include <thread>
#include <utility>

#include "core/error.h"

namespace dts {

std::string_view name(PsMode mode) {
  switch (mode) {
    case PsMode::sync: return "ps-sync";
    case PsMode::async: return "ps-async";
    case PsMode::ssp: return "ps-ssp";
    case PsMode::backup: return "ps-backup";
  }
  return "?";
}

namespace {

// The pause marker's step and batch rows, for a reader of the wire: the server itself finds the
// marker by counting (quiesce()), never by its content.
constexpr int64_t kPaused = -1;

int64_t header_words(int servers) { return 4 + servers; }

bool rounds(PsMode mode) { return mode == PsMode::sync || mode == PsMode::backup; }

// The loss scale of a worker's gradient: its rows' part of the global mean (sync, backup: the
// sum over workers is the mean), or the mean over its own rows (async, ssp: each gradient is an
// update of its own).
double loss_scale(PsMode mode, int64_t rows, int64_t batch_rows) {
  return rounds(mode) ? static_cast<double>(rows) / static_cast<double>(batch_rows) : 1.0;
}

// ps-backup rescales the W - b gradients it sums to the mean of their rows.
double backup_scale(int64_t batch_rows, int64_t used_rows) {
  if (used_rows < 1 || batch_rows < 1) return 1.0;  // a corrupted header: the audit will say so
  return used_rows == batch_rows ? 1.0 : static_cast<double>(batch_rows) / static_cast<double>(used_rows);
}

// A worker's rows of a batch as a header states it (0 for a header no worker could have sent).
int64_t rows_of(int64_t batch_rows, int workers, int worker) {
  return batch_rows < 1 ? 0 : even_split(batch_rows, workers, worker).second;
}

Error bad_log(const std::string& why) { return Error(Error::Kind::invalid_argument, "ps log: " + why); }

}  // namespace

// ---- the log -------------------------------------------------------------------------------

std::vector<int64_t> PsServerLog::serialize() const {
  std::vector<int64_t> words{server, static_cast<int64_t>(gradients.size()), static_cast<int64_t>(updates.size()),
                             static_cast<int64_t>(lead.size())};
  for (const PsGradient& g : gradients) {
    words.insert(words.end(), {g.arrival, g.worker, g.step, g.batch_first, g.batch_size, g.update});
    words.insert(words.end(), g.versions.begin(), g.versions.end());
  }
  for (const auto& used : updates) {
    words.push_back(static_cast<int64_t>(used.size()));
    words.insert(words.end(), used.begin(), used.end());
  }
  words.insert(words.end(), lead.begin(), lead.end());
  return words;
}

PsServerLog PsServerLog::deserialize(const std::vector<int64_t>& words, int servers) {
  size_t at = 0;
  const auto next = [&]() {
    if (at >= words.size()) throw bad_log("record ends early (word " + std::to_string(at) + ")");
    return words[at++];
  };
  const auto count = [&](const char* what) {
    const int64_t n = next();
    // Every item takes at least one more word: a count beyond the words left is corrupt.
    if (n < 0 || static_cast<uint64_t>(n) > words.size() - at) throw bad_log(std::string("bad ") + what + " count");
    return static_cast<size_t>(n);
  };
  PsServerLog log;
  log.server = next();
  const size_t gradients = count("gradient"), updates = count("update"), leads = count("lead");
  for (size_t i = 0; i < gradients; ++i) {
    PsGradient g;
    g.arrival = next();
    g.worker = next();
    g.step = next();
    g.batch_first = next();
    g.batch_size = next();
    g.update = next();
    for (int j = 0; j < servers; ++j) g.versions.push_back(next());
    log.gradients.push_back(std::move(g));
  }
  for (size_t u = 0; u < updates; ++u) {
    std::vector<int64_t> used(count("update member"));
    for (auto& index : used) index = next();
    log.updates.push_back(std::move(used));
  }
  for (size_t i = 0; i < leads; ++i) log.lead.push_back(next());
  if (at != words.size()) throw bad_log(std::to_string(words.size() - at) + " words after the record");
  return log;
}

// ---- the update ----------------------------------------------------------------------------

template <class T>
void ps_apply(const kernels::KernelTable<T>& table, const TrainConfig& train, T* params, T* state1, T* state2,
              int64_t n, int64_t step, const std::vector<const T*>& gradients, double scale,
              kernels::Array<T>& scratch) {
  const T* gradient = gradients.empty() ? nullptr : gradients.front();
  if (gradient == nullptr) return;
  if (gradients.size() > 1 || scale != 1.0) {
    scratch.resize(n);
    table.copy(scratch.data(), gradients.front(), n);
    for (size_t k = 1; k < gradients.size(); ++k) table.add(scratch.data(), gradients[k], n);
    if (scale != 1.0) table.scale_in_double(scratch.data(), scale, n);
    gradient = scratch.data();
  }
  optimizer_step(table, train, params, gradient, state1, state2, n, step);
}

template void ps_apply<float>(const kernels::KernelTable<float>&, const TrainConfig&, float*, float*, float*, int64_t,
                              int64_t, const std::vector<const float*>&, double, kernels::Array<float>&);
template void ps_apply<double>(const kernels::KernelTable<double>&, const TrainConfig&, double*, double*, double*,
                               int64_t, int64_t, const std::vector<const double*>&, double, kernels::Array<double>&);

// ---- the replay ----------------------------------------------------------------------------

namespace {

// The logs, checked against the protocol. Returns the first problem, or "".
std::string validate(const PsReplayInput& in) {
  const int S = in.servers, W = in.workers;
  if (static_cast<int>(in.logs.size()) != S) {
    return std::to_string(in.logs.size()) + " logs for " + std::to_string(S) + " servers";
  }
  struct Push {
    int64_t first, size;
    std::vector<int64_t> versions;
  };
  std::map<std::pair<int64_t, int64_t>, Push> first_server;  // (worker, step) as server 0 saw it
  for (int j = 0; j < S; ++j) {
    const PsServerLog& log = in.logs[static_cast<size_t>(j)];
    const std::string where = "server " + std::to_string(j) + ": ";
    if (log.server != j) return where + "log of server " + std::to_string(log.server);
    std::vector<int64_t> next_step(static_cast<size_t>(W), 0);
    for (size_t i = 0; i < log.gradients.size(); ++i) {
      const PsGradient& g = log.gradients[i];
      if (g.arrival != static_cast<int64_t>(i)) return where + "arrival " + std::to_string(i) + " numbered " + std::to_string(g.arrival);
      if (g.worker < 0 || g.worker >= W) return where + "gradient from worker " + std::to_string(g.worker);
      if (static_cast<int>(g.versions.size()) != S || g.batch_size < 1 || g.batch_first < 0) {
        return where + "malformed gradient at arrival " + std::to_string(i);
      }
      int64_t& due = next_step[static_cast<size_t>(g.worker)];
      if (g.step != due) {
        return where + "worker " + std::to_string(g.worker) + "'s step " + std::to_string(g.step) + " arrived where step " +
               std::to_string(due) + " was due (a push lost, duplicated or reordered)";
      }
      ++due;
      for (int64_t v : g.versions) {
        if (v < 0) return where + "worker " + std::to_string(g.worker) + " step " + std::to_string(g.step) + ": negative version";
      }
      const auto key = std::make_pair(g.worker, g.step);
      if (j == 0) {
        first_server[key] = {g.batch_first, g.batch_size, g.versions};
      } else {
        auto it = first_server.find(key);
        if (it == first_server.end()) {
          return where + "worker " + std::to_string(g.worker) + " step " + std::to_string(g.step) + " never reached server 0";
        }
        if (it->second.first != g.batch_first || it->second.size != g.batch_size || it->second.versions != g.versions) {
          return where + "worker " + std::to_string(g.worker) + " step " + std::to_string(g.step) +
                 " differs from what server 0 received (batch or versions)";
        }
      }
    }
    if (j > 0) {
      for (int w = 0; w < W; ++w) {
        const int64_t seen0 = static_cast<int64_t>(std::count_if(in.logs[0].gradients.begin(), in.logs[0].gradients.end(),
                                                                 [&](const PsGradient& g) { return g.worker == w; }));
        if (next_step[static_cast<size_t>(w)] != seen0) {
          return where + "received " + std::to_string(next_step[static_cast<size_t>(w)]) + " pushes of worker " +
                 std::to_string(w) + ", server 0 " + std::to_string(seen0);
        }
      }
    }
    std::vector<int> uses(log.gradients.size(), 0);
    for (size_t u = 0; u < log.updates.size(); ++u) {
      const auto& used = log.updates[u];
      const std::string at = where + "update " + std::to_string(u) + ": ";
      const size_t want = in.mode == PsMode::sync ? static_cast<size_t>(W)
                          : in.mode == PsMode::backup ? static_cast<size_t>(W - in.backup)
                                                      : 1;
      if (used.size() != want) return at + std::to_string(used.size()) + " gradients, the mode sums " + std::to_string(want);
      for (int64_t index : used) {
        if (index < 0 || index >= static_cast<int64_t>(log.gradients.size())) return at + "no gradient " + std::to_string(index);
        const PsGradient& g = log.gradients[static_cast<size_t>(index)];
        if (g.update != static_cast<int64_t>(u) || uses[static_cast<size_t>(index)]++ > 0) {
          return at + "gradient " + std::to_string(index) + " is logged for update " + std::to_string(g.update);
        }
        const int64_t v = g.versions[static_cast<size_t>(j)];
        if (v > static_cast<int64_t>(u)) return at + "computed on version " + std::to_string(v) + ", which did not exist yet";
        if (rounds(in.mode) && v != static_cast<int64_t>(u)) {
          return at + "worker " + std::to_string(g.worker) + " computed on version " + std::to_string(v) +
                 " (a synchronous update sums gradients of the current version only)";
        }
      }
      if (rounds(in.mode)) {
        for (size_t k = 1; k < used.size(); ++k) {
          if (log.gradients[static_cast<size_t>(used[k - 1])].worker >= log.gradients[static_cast<size_t>(used[k])].worker) {
            return at + "gradients not summed in worker order";
          }
        }
      }
    }
    for (size_t i = 0; i < log.gradients.size(); ++i) {
      if (log.gradients[i].update >= 0 && uses[i] == 0) return where + "gradient " + std::to_string(i) + " logged as used by no update";
      if (log.gradients[i].update < 0 && in.mode != PsMode::backup) {
        return where + "gradient " + std::to_string(i) + " dropped, which only ps-backup does";
      }
    }
  }
  return "";
}

template <class T>
PsReplayResult replay(const PsReplayInput& in) {
  PsReplayResult result;
  result.problem = validate(in);
  if (!result.problem.empty()) return result;
  const int S = in.servers, W = in.workers;
  const int64_t psi = parameter_count(in.spec);
  // The run's memory and kernels: on the device the same operations in the same order as the run.
  const Memory memory = in.memory;
  const kernels::KernelTable<T> table(memory);
  Mlp<T> mlp(in.spec, compute_of(in.precision), memory);
  const auto zeros = [&](int64_t n) {
    kernels::Array<T> a(memory, n);
    table.zero(a.data(), n);
    return a;
  };
  const auto clone = [&](const kernels::Array<T>& from) {
    kernels::Array<T> a(memory, from.size());
    table.copy(a.data(), from.data(), from.size());
    return a;
  };

  struct Server {
    int64_t begin = 0, count = 0, version = 0;
    size_t next = 0;  // next update to replay
    kernels::Array<T> params, state1, state2;
    std::map<int64_t, kernels::Array<T>> history;  // versions still referenced
    std::map<int64_t, int64_t> references;         // version -> used gradients still to replay that name it
  };
  std::vector<Server> servers(static_cast<size_t>(S));
  const std::vector<double> init = init_parameters(in.spec);
  for (int j = 0; j < S; ++j) {
    Server& s = servers[static_cast<size_t>(j)];
    std::tie(s.begin, s.count) = even_split(psi, S, j);
    const std::vector<T> range(init.begin() + s.begin, init.begin() + s.begin + s.count);
    s.params = kernels::Array<T>(memory, s.count);
    s.params.upload(range.data(), s.count);
    s.state1 = zeros(s.count);
    s.state2 = kernels::Array<T>(memory);
    if (in.train.optimizer == OptimizerKind::adamw) s.state2 = zeros(s.count);
  }
  // Each used gradient names a version of every server's range; one gradient is used by every
  // server, and recomputed once (cached until its last server has used it).
  std::map<std::pair<int64_t, int64_t>, int> uses_left;
  for (const PsServerLog& log : in.logs) {
    for (const auto& used : log.updates) {
      for (int64_t index : used) {
        const PsGradient& g = log.gradients[static_cast<size_t>(index)];
        for (int i = 0; i < S; ++i) ++servers[static_cast<size_t>(i)].references[g.versions[static_cast<size_t>(i)]];
        ++uses_left[{g.worker, g.step}];
      }
    }
  }
  std::map<std::pair<int64_t, int64_t>, kernels::Array<T>> cache;
  kernels::Array<T> full(memory, psi), scratch(memory);
  const auto values_at = [&](int i, int64_t version) -> const kernels::Array<T>* {
    Server& s = servers[static_cast<size_t>(i)];
    if (version == s.version) return &s.params;
    auto it = s.history.find(version);
    return it == s.history.end() ? nullptr : &it->second;
  };

  bool progress = true;
  while (progress) {
    progress = false;
    for (int j = 0; j < S; ++j) {
      Server& s = servers[static_cast<size_t>(j)];
      const PsServerLog& log = in.logs[static_cast<size_t>(j)];
      while (s.next < log.updates.size()) {
        const auto& used = log.updates[s.next];
        bool ready = true;
        for (int64_t index : used) {
          const PsGradient& g = log.gradients[static_cast<size_t>(index)];
          for (int i = 0; i < S && ready; ++i) ready = values_at(i, g.versions[static_cast<size_t>(i)]) != nullptr;
        }
        if (!ready) break;
        std::vector<const T*> gradients;
        int64_t used_rows = 0, batch_rows = 0;
        for (int64_t index : used) {
          const PsGradient& g = log.gradients[static_cast<size_t>(index)];
          const auto key = std::make_pair(g.worker, g.step);
          auto it = cache.find(key);
          const auto [first, rows] = even_split(g.batch_size, W, static_cast<int>(g.worker));
          if (it == cache.end()) {
            for (int i = 0; i < S; ++i) {
              const Server& other = servers[static_cast<size_t>(i)];
              const kernels::Array<T>& v = *values_at(i, g.versions[static_cast<size_t>(i)]);
              table.copy(full.data() + other.begin, v.data(), other.count);
            }
            kernels::Array<T> gradient = zeros(psi);
            const Batch batch = make_batch(in.spec, g.batch_first, g.batch_size);
            mlp.forward_backward(full.data(), gradient.data(), slice_batch(batch, first, rows),
                                 loss_scale(in.mode, rows, g.batch_size));
            it = cache.emplace(key, std::move(gradient)).first;
          }
          gradients.push_back(it->second.data() + s.begin);
          used_rows += rows;
          batch_rows = g.batch_size;
        }
        const double scale = in.mode == PsMode::backup ? backup_scale(batch_rows, used_rows) : 1.0;
        // The version this update replaces stays while a gradient yet to be replayed names it.
        if (auto r = s.references.find(s.version); r != s.references.end() && r->second > 0) {
          s.history.insert_or_assign(s.version, clone(s.params));
        }
        ps_apply(table, in.train, s.params.data(), s.state1.data(), s.state2.empty() ? nullptr : s.state2.data(), s.count,
                 s.version + 1, gradients, scale, scratch);
        for (int64_t index : used) {
          const PsGradient& g = log.gradients[static_cast<size_t>(index)];
          result.staleness.push_back(static_cast<double>(static_cast<int64_t>(s.next) - g.versions[static_cast<size_t>(j)]));
          for (int i = 0; i < S; ++i) {
            Server& other = servers[static_cast<size_t>(i)];
            const int64_t v = g.versions[static_cast<size_t>(i)];
            if (--other.references[v] == 0) {
              other.references.erase(v);
              other.history.erase(v);
            }
          }
          if (--uses_left[{g.worker, g.step}] == 0) cache.erase({g.worker, g.step});
        }
        ++s.version;
        ++s.next;
        progress = true;
      }
    }
  }
  for (int j = 0; j < S; ++j) {
    if (servers[static_cast<size_t>(j)].next < in.logs[static_cast<size_t>(j)].updates.size()) {
      result.problem = "server " + std::to_string(j) + ": update " + std::to_string(servers[static_cast<size_t>(j)].next) +
                       " uses a version no order of the logged updates reaches";
      return result;
    }
  }
  for (const Server& s : servers) {
    const std::vector<T> params = s.params.download();
    result.parameters.insert(result.parameters.end(), params.begin(), params.end());
  }
  const PsServerLog& first = in.logs.front();
  result.updates = static_cast<int64_t>(first.updates.size());
  for (const PsGradient& g : first.gradients) (g.update >= 0 ? result.applied : result.dropped) += 1;
  if (in.mode == PsMode::backup) {
    result.dropped_per_update.assign(first.updates.size(), 0);
    for (const PsGradient& g : first.gradients) {
      const int64_t v = g.versions[0];
      if (g.update < 0 && v >= 0 && v < static_cast<int64_t>(first.updates.size())) result.dropped_per_update[static_cast<size_t>(v)] += 1;
    }
  }
  return result;
}

}  // namespace

PsReplayResult replay_ps(const PsReplayInput& input) {
  if (input.servers < 1 || input.workers < 1 || input.backup < 0 || input.backup >= input.workers) {
    throw Error(Error::Kind::invalid_argument, "ps replay: servers >= 1, workers >= 1 and 0 <= backup < workers");
  }
  return input.precision == Precision::f64 ? replay<double>(input) : replay<float>(input);
}

// ---- the strategy --------------------------------------------------------------------------

// One worker's receives on a server (header and payload), and the server's replies to it, all in
// the communicator's memory.
template <class T>
struct PsStrategy<T>::Pending {
  kernels::Array<int64_t> header;
  kernels::Array<T> payload;
  std::unique_ptr<Work> header_work, payload_work;
  bool posted = false;
  kernels::Array<int64_t> reply_header;
  kernels::Array<T> reply_payload;
  std::unique_ptr<Work> reply_header_work, reply_payload_work;
};

template <class T>
PsStrategy<T>::PsStrategy(const ModelSpec& spec, const ParallelConfig& config, Communicator& world, PsMode mode,
                          Precision precision)
    : spec_(spec),
      config_(config),
      world_(world),
      mode_(mode),
      precision_(precision),
      rank_(world.rank()),
      servers_(config.servers),
      workers_(config.dp),
      psi_(parameter_count(spec)),
      table_(world.memory()),
      params_(world.memory()),
      grads_(world.memory()),
      state1_(world.memory()),
      state2_(world.memory()),
      scratch_(world.memory()),
      header_(world.memory()),
      reply_versions_(world.memory()) {
  const std::string who = std::string(dts::name(mode)) + " " + config.describe() + ": ";
  if (servers_ < 1 || workers_ < 1 || world.size() != servers_ + workers_) {
    throw Error(Error::Kind::invalid_argument, who + "needs servers >= 1 and workers >= 1 making up the " +
                                                   std::to_string(world.size()) + " ranks");
  }
  if (config.tp != 1 || config.pp != 1 || config.zero != 0 || config.microbatches != 1) {
    throw Error(Error::Kind::invalid_argument, who + "splits the batch over workers only (tp, pp 1; no ZeRO; mb 1)");
  }
  if (config.staleness < 0 || (mode == PsMode::backup) != (config.backup > 0) || config.backup >= workers_) {
    throw Error(Error::Kind::invalid_argument, who + "staleness >= 0, and 1 <= backup < workers for ps-backup only");
  }
  const std::vector<double> init = init_parameters(spec);
  const Memory memory = world.memory();
  if (is_server()) {
    std::tie(begin_, count_) = even_split(psi_, servers_, rank_);
    const std::vector<T> range(init.begin() + begin_, init.begin() + begin_ + count_);
    params_.resize(count_);
    params_.upload(range.data(), count_);
    state1_.resize(count_);
    table_.zero(state1_.data(), count_);
    if (config.train.optimizer == OptimizerKind::adamw) {
      state2_.resize(count_);
      table_.zero(state2_.data(), count_);
    }
    pushes_.assign(static_cast<size_t>(workers_), 0);
    owed_version_.assign(static_cast<size_t>(workers_), 0);
    log_.server = rank_;
    for (int w = 0; w < workers_; ++w) {
      auto p = std::make_unique<Pending>();
      p->header = kernels::Array<int64_t>(memory, header_words(servers_));
      p->payload = kernels::Array<T>(memory, count_);
      p->reply_header = kernels::Array<int64_t>(memory, 1);
      p->reply_payload = kernels::Array<T>(memory, count_);
      pending_.push_back(std::move(p));
    }
  } else {
    mlp_ = std::make_unique<Mlp<T>>(spec, compute_of(precision), memory);
    const std::vector<T> host(init.begin(), init.end());
    params_.resize(psi_);
    params_.upload(host.data(), psi_);
    grads_.resize(psi_);
    table_.zero(grads_.data(), psi_);
    header_.resize(header_words(servers_));
    reply_versions_.resize(servers_);
    versions_.assign(static_cast<size_t>(servers_), 0);
  }
  table_.synchronize();
}

// Ending the steps is collective (quiesce()); a suite that only times steps drops the strategy
// without asking for the parameters. Not while an exception unwinds: the other ranks may not be here.
template <class T>
PsStrategy<T>::~PsStrategy() {
  if (!running_ || std::uncaught_exceptions() > 0) return;
  try {
    quiesce();
  } catch (...) {  // a destructor must not throw; a failing stack has failed the steps already
  }
}

template <class T>
void PsStrategy<T>::post_receive(int w) {
  Pending& p = *pending_[static_cast<size_t>(w)];
  p.header_work = world_.irecv(p.header.data(), static_cast<size_t>(p.header.size()), DType::i64, servers_ + w);
  p.payload_work = world_.irecv(p.payload.data(), static_cast<size_t>(p.payload.size()), dtype_of<T>(), servers_ + w);
  p.posted = true;
}

template <class T>
int PsStrategy<T>::poll() {
  for (int i = 0; i < workers_; ++i) {
    const int w = (poll_start_ + i) % workers_;
    Pending& p = *pending_[static_cast<size_t>(w)];
    if (!p.posted) continue;
    // Both parts must complete; test() drives progress of each (Open MPI progresses inside calls).
    if (p.header_work && p.header_work->test()) p.header_work.reset();
    if (p.payload_work && p.payload_work->test()) p.payload_work.reset();
    if (!p.header_work && !p.payload_work) {
      p.posted = false;
      poll_start_ = (w + 1) % workers_;
      return w;
    }
  }
  return -1;
}

template <class T>
size_t PsStrategy<T>::take(int w, double& loss) {
  const std::vector<int64_t> header = pending_[static_cast<size_t>(w)]->header.download();
  PsGradient g;
  g.arrival = static_cast<int64_t>(log_.gradients.size());
  g.worker = w;
  g.step = header[0];
  g.batch_first = header[1];
  g.batch_size = header[2];
  loss = std::bit_cast<double>(header[3]);
  g.versions.assign(header.begin() + 4, header.end());
  log_.gradients.push_back(std::move(g));
  ++pushes_[static_cast<size_t>(w)];
  ++served_;
  return log_.gradients.size() - 1;
}

template <class T>
void PsStrategy<T>::reply(int w, const T* values, int64_t version, StepReport& report) {
  Pending& p = *pending_[static_cast<size_t>(w)];
  // The worker received the last reply before it pushed again: these complete at once.
  if (p.reply_header_work) p.reply_header_work->wait();
  if (p.reply_payload_work) p.reply_payload_work->wait();
  p.reply_header.upload(&version, 1);
  table_.copy(p.reply_payload.data(), values, count_);
  table_.synchronize();  // the copy is done before the communicator reads it
  p.reply_header_work = world_.isend(p.reply_header.data(), 1, DType::i64, servers_ + w);
  p.reply_payload_work = world_.isend(p.reply_payload.data(), static_cast<size_t>(count_), dtype_of<T>(), servers_ + w);
  report.bytes_sent += static_cast<int64_t>(sizeof(int64_t) + static_cast<size_t>(count_) * sizeof(T));
  owed_version_[static_cast<size_t>(w)] = version;
}

template <class T>
void PsStrategy<T>::apply(const std::vector<size_t>& used, StepReport& report) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<const T*> gradients;
  int64_t used_rows = 0, batch_rows = 1;
  std::vector<int64_t> members;
  for (size_t index : used) {
    PsGradient& g = log_.gradients[index];
    g.update = version_;
    members.push_back(static_cast<int64_t>(index));
    gradients.push_back(pending_[static_cast<size_t>(g.worker)]->payload.data());
    used_rows += rows_of(g.batch_size, workers_, static_cast<int>(g.worker));
    batch_rows = g.batch_size;
  }
  const double scale = mode_ == PsMode::backup ? backup_scale(batch_rows, used_rows) : 1.0;
  // A worker that will still ask for the version this update replaces (ps-backup's late ones)
  // gets it from the history.
  if (rounds(mode_)) {
    const int64_t oldest = *std::min_element(owed_version_.begin(), owed_version_.end());
    if (oldest < version_) {
      if (history_.empty()) history_base_ = version_;
      history_.emplace_back(world_.memory(), count_);
      table_.copy(history_.back().data(), params_.data(), count_);
      history_peak_ = std::max<int64_t>(history_peak_, static_cast<int64_t>(history_.size()));
    }
  }
  ps_apply(table_, config_.train, params_.data(), state1_.data(), state2_.empty() ? nullptr : state2_.data(), count_,
           version_ + 1, gradients, scale, scratch_);
  // Done before the payloads it read take the next pushes (and its time is the device's).
  table_.synchronize();
  log_.updates.push_back(std::move(members));
  // Planted fault (tests): the log claims each odd update came before the one it followed.
  const size_t u = log_.updates.size() - 1;
  if (swap_updates_ && mode_ == PsMode::async && u % 2 == 1) {
    std::swap(log_.updates[u - 1], log_.updates[u]);
    log_.gradients[static_cast<size_t>(log_.updates[u - 1][0])].update = version_ - 1;
    log_.gradients[static_cast<size_t>(log_.updates[u][0])].update = version_;
  }
  ++version_;
  report.compute_time += seconds_since(start);
}

template <class T>
void PsStrategy<T>::release_ssp(StepReport& report) {
  const int64_t slowest = *std::min_element(pushes_.begin(), pushes_.end());
  for (size_t i = 0; i < waiting_.size();) {
    const int w = waiting_[i];
    const int64_t lead = pushes_[static_cast<size_t>(w)] - slowest;
    if (lead <= config_.staleness || ignore_bound_) {
      log_.lead.push_back(lead);
      reply(w, params_.data(), version_, report);
      post_receive(w);
      waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

template <class T>
void PsStrategy<T>::serve_one(int w, StepReport& report) {
  double loss = 0;
  const size_t index = take(w, loss);
  const int64_t rows = rows_of(log_.gradients[index].batch_size, workers_, w);
  loss_sum_ += loss * static_cast<double>(rows);
  loss_count_ += rows;
  if (mode_ == PsMode::async || mode_ == PsMode::ssp) {
    apply({index}, report);
    if (mode_ == PsMode::async) {
      reply(w, params_.data(), version_, report);
      post_receive(w);
    } else {
      waiting_.push_back(w);
      release_ssp(report);
    }
    return;
  }
  // sync and backup: a gradient of the current version waits for its update; a late one is dropped.
  const int64_t computed_on = owed_version_[static_cast<size_t>(w)];
  if (computed_on < version_) {
    const int64_t next = computed_on + 1;
    const T* values = next == version_ ? params_.data() : history_[static_cast<size_t>(next - history_base_)].data();
    reply(w, values, next, report);
    post_receive(w);
    trim_history();
    return;
  }
  fresh_.push_back(index);
  if (static_cast<int>(fresh_.size()) < workers_ - config_.backup) return;
  std::vector<size_t> fresh;
  fresh.swap(fresh_);
  std::sort(fresh.begin(), fresh.end(),
            [&](size_t a, size_t b) { return log_.gradients[a].worker < log_.gradients[b].worker; });
  apply(fresh, report);
  for (size_t i : fresh) {
    const int fw = static_cast<int>(log_.gradients[i].worker);
    reply(fw, params_.data(), version_, report);
    post_receive(fw);
  }
  trim_history();
}

template <class T>
void PsStrategy<T>::trim_history() {
  // A worker owed version o asks for o + 1 next: versions up to the oldest owed are done with.
  const int64_t oldest = *std::min_element(owed_version_.begin(), owed_version_.end());
  while (!history_.empty() && history_base_ <= oldest) {
    history_.pop_front();
    ++history_base_;
  }
}

template <class T>
void PsStrategy<T>::serve_until(const std::function<bool()>& done, StepReport& report) {
  while (!done()) {
    const int w = poll();
    if (w < 0) {
      const auto idle_start = std::chrono::steady_clock::now();
      std::this_thread::yield();  // share the core with workers on an oversubscribed node
      report.idle_time += seconds_since(idle_start);
      continue;
    }
    serve_one(w, report);
  }
}

template <class T>
StepReport PsStrategy<T>::server_step() {
  const auto start = std::chrono::steady_clock::now();
  StepReport report;
  loss_sum_ = 0;
  loss_count_ = 0;
  if (!running_) {
    // Posted at the first step after a start or a pause, matched by the pause markers (quiesce()).
    for (int w = 0; w < workers_; ++w) post_receive(w);
    running_ = true;
  }
  ++server_steps_;
  // sync, backup: this step's update, and (backup) its late gradients too: a worker whose gradient
  // came late must get its reply within the step, or a barrier between steps would wait for it.
  // async, ssp: W more pushes, from whichever workers.
  const int64_t k = server_steps_;
  if (rounds(mode_)) {
    serve_until([&] { return version_ >= k && *std::min_element(pushes_.begin(), pushes_.end()) >= k; }, report);
  } else {
    serve_until([&] { return served_ >= k * workers_; }, report);
  }
  report.loss = loss_count_ > 0 ? loss_sum_ / static_cast<double>(loss_count_) : NAN;
  report.step_time = seconds_since(start);
  report.comm_time = report.step_time - report.compute_time;
  report.exposed_comm_time = report.comm_time;
  return report;
}

template <class T>
StepReport PsStrategy<T>::worker_step(const Batch& batch) {
  if (batch.size < workers_) {
    throw Error(Error::Kind::invalid_argument, std::string(name()) + ": a global batch of " + std::to_string(batch.size) +
                                                   " rows leaves a worker without a row");
  }
  const auto start = std::chrono::steady_clock::now();
  StepReport report;
  const int w = rank_ - servers_;
  const auto [first, rows] = even_split(batch.size, workers_, w);
  const Batch local = slice_batch(batch, first, rows);
  const StragglerWait wait = straggler_wait_for(table_.memory());
  const double loss = mlp_->forward_backward(params_.data(), grads_.data(), local, loss_scale(mode_, rows, batch.size));
  table_.synchronize();  // the gradient is done before it is sent, and compute time is the device's
  activations_peak_ = std::max(activations_peak_, mlp_->activation_bytes());
  report.compute_time = compute_seconds(config_, rank_, start, wait);

  const auto comm_start = std::chrono::steady_clock::now();
  std::vector<int64_t> header{worker_steps_, batch.first, batch.size, std::bit_cast<int64_t>(loss)};
  header.insert(header.end(), versions_.begin(), versions_.end());
  header_.upload(header.data(), static_cast<int64_t>(header.size()));
  std::vector<std::unique_ptr<Work>> works;
  for (int j = 0; j < servers_; ++j) {
    const auto [b, n] = even_split(psi_, servers_, j);
    works.push_back(world_.isend(header_.data(), header.size(), DType::i64, j));
    works.push_back(world_.isend(grads_.data() + b, static_cast<size_t>(n), dtype_of<T>(), j));
    report.bytes_sent += static_cast<int64_t>(header.size() * sizeof(int64_t) + static_cast<size_t>(n) * sizeof(T));
  }
  for (int j = 0; j < servers_; ++j) {
    const auto [b, n] = even_split(psi_, servers_, j);
    works.push_back(world_.irecv(reply_versions_.data() + j, 1, DType::i64, j));
    works.push_back(world_.irecv(params_.data() + b, static_cast<size_t>(n), dtype_of<T>(), j));
  }
  for (auto& work : works) work->wait();  // a server that never answers is the watchdog's to report
  versions_ = reply_versions_.download();
  ++worker_steps_;
  running_ = true;
  report.comm_time = seconds_since(comm_start);
  report.exposed_comm_time = report.comm_time;
  report.idle_time = report.comm_time;  // a worker waits for its servers, idle
  report.loss = loss;
  report.collectives = servers_;
  report.step_time = seconds_since(start);
  return report;
}

template <class T>
StepReport PsStrategy<T>::step(const Batch& batch) {
  if (batch.size < 1) throw Error(Error::Kind::invalid_argument, std::string(name()) + ": empty global batch");
  return is_server() ? server_step() : worker_step(batch);
}

template <class T>
void PsStrategy<T>::quiesce() {
  // No step since the start or the last pause (on any rank: they all make as many): nothing is
  // posted, nothing to end.
  if (!running_) return;
  running_ = false;
  // Every rank made as many steps: a server has served all pushes when it has W of them per step
  // (none is left after the last step; the count makes sure). Its receives posted after the last
  // replies are then matched by the workers' pause markers, sent after a barrier so that no marker
  // can meet a server still serving pushes: the pause is found by counting, never by what a
  // message says (a stack that corrupts messages must fail the audit, not hang the run). The next
  // step posts the receives again, so nothing is left posted between: a collective of a backend
  // built on point-to-point messages (tree, ring) cannot meet a receive meant for a push.
  if (is_server()) {
    StepReport ignored;
    serve_until([&] { return served_ >= server_steps_ * workers_; }, ignored);
    release_ssp(ignored);
    for (auto& p : pending_) {
      if (p->reply_header_work) p->reply_header_work->wait();
      if (p->reply_payload_work) p->reply_payload_work->wait();
      p->reply_header_work.reset();
      p->reply_payload_work.reset();
    }
    world_.barrier();
    for (auto& p : pending_) {
      if (p->header_work) p->header_work->wait();
      if (p->payload_work) p->payload_work->wait();
      p->header_work.reset();
      p->payload_work.reset();
      p->posted = false;
    }
  } else {
    world_.barrier();
    std::vector<int64_t> header(static_cast<size_t>(header_words(servers_)), 0);
    header[0] = header[2] = kPaused;
    header_.upload(header.data(), static_cast<int64_t>(header.size()));
    std::vector<std::unique_ptr<Work>> works;
    for (int j = 0; j < servers_; ++j) {
      const int64_t n = even_split(psi_, servers_, j).second;
      works.push_back(world_.isend(header_.data(), header.size(), DType::i64, j));
      works.push_back(world_.isend(grads_.data(), static_cast<size_t>(n), dtype_of<T>(), j));
    }
    for (auto& work : works) work->wait();
  }
}

template <class T>
std::vector<double> PsStrategy<T>::full_parameters() {
  quiesce();
  std::vector<double> full(static_cast<size_t>(psi_));
  kernels::Array<T> range(world_.memory());
  for (int j = 0; j < servers_; ++j) {
    const auto [b, n] = even_split(psi_, servers_, j);
    range.resize(n);
    if (rank_ == j) {
      table_.copy(range.data(), params_.data(), n);
    } else {
      table_.zero(range.data(), n);
    }
    table_.synchronize();
    world_.broadcast(range.data(), range.data(), static_cast<size_t>(n), dtype_of<T>(), j);
    world_.synchronize();
    const std::vector<T> values = range.download();
    std::copy(values.begin(), values.end(), full.begin() + b);
  }
  return full;
}

template <class T>
MemoryReport PsStrategy<T>::memory() const {
  const auto bytes = [](size_t elements) { return static_cast<int64_t>(elements * sizeof(T)); };
  MemoryReport m;
  if (is_server()) {
    // Its range, the versions late workers were still owed at most, one receive and one reply
    // buffer per worker, the optimizer state.
    m.params = params_.bytes() * (1 + history_peak_);
    m.grads = bytes(static_cast<size_t>(count_)) * workers_ * 2 + scratch_.bytes();
    m.optimizer = state1_.bytes() + state2_.bytes();
  } else {
    m.params = params_.bytes();
    m.grads = grads_.bytes();
    m.activations_peak = activations_peak_;
  }
  return m;
}

std::vector<PlannedCall> ps_calls(int64_t psi, int servers, int workers, int rank, DType dtype) {
  const auto e = static_cast<int64_t>(size_of(dtype));
  std::vector<PlannedCall> calls;
  if (rank >= servers) {
    for (int j = 0; j < servers; ++j) {
      calls.push_back(message_call("ps", DType::i64, header_words(servers) * 8, rank, j));
      calls.push_back(message_call("ps", dtype, even_split(psi, servers, j).second * e, rank, j));
    }
    return calls;
  }
  const int64_t range = even_split(psi, servers, rank).second;
  for (int w = 0; w < workers; ++w) {
    calls.push_back(message_call("ps", DType::i64, 8, rank, servers + w));
    calls.push_back(message_call("ps", dtype, range * e, rank, servers + w));
  }
  return calls;
}

template <class T>
std::vector<TrafficTheory> PsStrategy<T>::expected_traffic() const {
  const auto e = static_cast<double>(sizeof(T));
  const double header = static_cast<double>(header_words(servers_) * 8);
  const std::string size = std::to_string(sizeof(T));
  const double sent = bytes_sent(ps_calls(psi_, servers_, workers_, rank_, dtype_of<T>()), "ps");
  if (!is_server()) {
    TrafficTheory t{"ps", sent, 0,
                    "Psi*" + size + " + S*(4+S)*8 (Psi=" + std::to_string(psi_) + ", S=" + std::to_string(servers_) +
                        "): the gradient to its servers"};
    t.received = static_cast<double>(psi_) * e + servers_ * 8.0;
    t.received_formula = "Psi*" + size + " + S*8: a reply of each server's range";
    return {t};
  }
  // A reply per push, every push of a step served within it.
  TrafficTheory t{"ps", sent, 0,
                  "W*(8 + n_j*" + size + ") (W=" + std::to_string(workers_) + ", n_j=" + std::to_string(count_) +
                      "): its range to every worker; grows with W"};
  t.received = workers_ * (static_cast<double>(count_) * e + header);
  t.received_formula = "W*(n_j*" + size + " + (4+S)*8): every worker's gradient of its range; grows with W";
  return {t};
}

template <class T>
std::vector<ReplicaDigest> PsStrategy<T>::replica_digests() {
  const auto key = [](int j) { return "ps.range" + std::to_string(j); };
  if (is_server()) return {{key(rank_), digest_of(params_.download())}};
  // Only where every worker's last reply is the servers' final version.
  if (!rounds(mode_)) return {};
  const std::vector<T> params = params_.download();
  std::vector<ReplicaDigest> digests;
  for (int j = 0; j < servers_; ++j) {
    const auto [b, n] = even_split(psi_, servers_, j);
    digests.push_back({key(j), digest_of(params.data() + b, static_cast<size_t>(n))});
  }
  return digests;
}

template <class T>
void PsStrategy<T>::set_learning_rate(double lr) {
  set_optimizer_learning_rate(config_.train, lr, name());
}

template <class T>
std::optional<ReplayAudit> PsStrategy<T>::audit() {
  quiesce();
  ReplayAudit audit;
  if (!is_server()) return audit;
  // Point to point only: each server's log and range go to rank 0 (server 0) as they are.
  // The size, the log's words and the range, each through the communicator's memory.
  const std::vector<int64_t> mine = log_.serialize();
  if (rank_ != 0) {
    const auto size = static_cast<int64_t>(mine.size());
    kernels::Array<int64_t> words(world_.memory(), 1 + size);
    words.upload(&size, 1);
    words.upload(mine.data(), size, 1);
    world_.send(words.data(), 1, DType::i64, 0);
    world_.send(words.data() + 1, mine.size(), DType::i64, 0);
    world_.send(params_.data(), static_cast<size_t>(count_), dtype_of<T>(), 0);
    world_.synchronize();  // the sends have read `words` before it goes
    return audit;
  }
  const std::vector<T> own = params_.download();
  std::vector<double> final_parameters(own.begin(), own.end());
  PsReplayInput input;
  input.spec = spec_;
  input.train = config_.train;
  input.precision = precision_;
  input.mode = mode_;
  input.servers = servers_;
  input.workers = workers_;
  input.backup = config_.backup;
  input.memory = world_.memory();
  input.logs.push_back(log_);
  for (int j = 1; j < servers_; ++j) {
    const int64_t size = receive_words(1, j)[0];
    if (size < 0 || size > (int64_t{1} << 40)) throw Error(Error::Kind::backend, "ps audit: server " + std::to_string(j) + " sent a log of " + std::to_string(size) + " words");
    input.logs.push_back(PsServerLog::deserialize(receive_words(static_cast<size_t>(size), j), servers_));
    const int64_t n = even_split(psi_, servers_, j).second;
    kernels::Array<T> range(world_.memory(), n);
    world_.recv(range.data(), static_cast<size_t>(n), dtype_of<T>(), j);
    world_.synchronize();
    const std::vector<T> values = range.download();
    final_parameters.insert(final_parameters.end(), values.begin(), values.end());
  }
  audit.ran = true;
  for (const PsServerLog& log : input.logs) audit.lead.insert(audit.lead.end(), log.lead.begin(), log.lead.end());
  const PsReplayResult replayed = replay_ps(input);
  audit.problem = replayed.problem;
  audit.updates = replayed.updates;
  audit.applied = replayed.applied;
  audit.dropped = replayed.dropped;
  audit.staleness = replayed.staleness;
  audit.dropped_per_update = replayed.dropped_per_update;
  audit.replayed = std::to_string(audit.updates) + " updates (" + std::to_string(audit.applied) + " gradients applied, " +
                   std::to_string(audit.dropped) + " dropped) replayed in one process from the servers' logs";
  if (!replayed.problem.empty()) return audit;
  for (size_t i = 0; i < final_parameters.size(); ++i) {
    const double a = final_parameters[i], b = replayed.parameters[i];
    if (std::memcmp(&a, &b, sizeof(double)) != 0) {
      ++audit.mismatched;
      audit.max_abs_difference = std::max(audit.max_abs_difference, std::fabs(a - b));
    }
  }
  if (audit.mismatched > 0) {
    audit.problem = std::to_string(audit.mismatched) + " of " + std::to_string(final_parameters.size()) +
                    " parameters differ from the replay of the servers' logs";
  }
  return audit;
}

template <class T>
std::vector<int64_t> PsStrategy<T>::receive_words(size_t count, int peer) {
  kernels::Array<int64_t> words(world_.memory(), static_cast<int64_t>(count));
  world_.recv(words.data(), count, DType::i64, peer);
  world_.synchronize();
  return words.download();
}

template class PsStrategy<float>;
template class PsStrategy<double>;

namespace {

// Host and device alike: the class takes the memory of its communicator (check_strategy has
// refused f64 on the device).
std::unique_ptr<Strategy> make_ps(PsMode mode, const ModelSpec& spec, const ParallelConfig& config,
                                  ProcessGroups& groups, Precision precision) {
  if (precision == Precision::f64) return std::make_unique<PsStrategy<double>>(spec, config, *groups.world, mode, precision);
  return std::make_unique<PsStrategy<float>>(spec, config, *groups.world, mode, precision);
}

StrategyTraits ps_traits(std::string summary, bool staleness, bool backup) {
  StrategyTraits traits = data_parallel_traits(std::move(summary));  // dp: the workers
  traits.servers = true;
  traits.staleness = staleness;
  traits.backup = backup;
  return traits;
}

template <PsMode mode>
std::unique_ptr<Strategy> make_ps_mode(const ModelSpec& spec, const ParallelConfig& config, ProcessGroups& groups,
                                       Precision precision) {
  return make_ps(mode, spec, config, groups, precision);
}

}  // namespace

DTS_REGISTER_STRATEGY("ps-sync",
                      ps_traits("parameter servers (servers=S): every update sums all workers' gradients in worker order",
                                false, false),
                      make_ps_mode<PsMode::sync>);
DTS_REGISTER_STRATEGY("ps-async",
                      ps_traits("parameter servers (servers=S): each gradient applied as it arrives", false, false),
                      make_ps_mode<PsMode::async>);
DTS_REGISTER_STRATEGY("ps-ssp",
                      ps_traits("parameter servers, stale synchronous (servers=S, staleness=s): async, no worker more "
                                "than s steps ahead of the slowest",
                                true, false),
                      make_ps_mode<PsMode::ssp>);
DTS_REGISTER_STRATEGY("ps-backup",
                      ps_traits("parameter servers with backup workers (servers=S, backup=b): each update takes the "
                                "first W-b gradients",
                                false, true),
                      make_ps_mode<PsMode::backup>);

DTS_REGISTER_DEVICE_STRATEGY("ps-sync", make_ps_mode<PsMode::sync>);
DTS_REGISTER_DEVICE_STRATEGY("ps-async", make_ps_mode<PsMode::async>);
DTS_REGISTER_DEVICE_STRATEGY("ps-ssp", make_ps_mode<PsMode::ssp>);
DTS_REGISTER_DEVICE_STRATEGY("ps-backup", make_ps_mode<PsMode::backup>);

}  // namespace dts

// Parameter-server training (ps-sync, ps-async, ps-ssp, ps-backup): ranks 0..S-1 are servers,
// each holding a contiguous range of the parameters (even_split of the reference layout) and its
// optimizer state; ranks S..N-1 are the W = N - S workers, each computing the gradient of its
// share of every global batch (even_split of the rows). A worker pushes its gradient, split by
// range, to every server (one header and one payload per server, point to point) and waits for
// each server's reply: its range of the parameters and that range's version (the count of
// updates the server has applied). A server posts one receive per worker and serves whichever
// completes (Work::test()): no any-source receive, so it runs over any point-to-point backend.
//
//   ps-sync    each update waits for every worker's gradient of the current version and sums them
//              in worker order (scaled by rows / global rows, as ddp does): deterministic, and the
//              same model as one process within the equivalence bound.
//   ps-backup  (Chen et al. 2016) the same, but an update uses the first W - b gradients computed
//              on the current version to arrive (summed in worker order, rescaled to the mean of
//              their rows); the b that come later are dropped, and their workers get the next
//              version, so every worker computes every step and exactly b gradients per update
//              are dropped.
//   ps-async   every gradient (the mean over its worker's rows) is applied as its own optimizer
//              step when it arrives, and its worker gets the fresh parameters at once.
//   ps-ssp     (Ho et al. 2013) async, but a worker that has pushed c gradients gets its reply only
//              once c - (the fewest any worker has pushed) <= s: no worker runs more than s steps
//              ahead of the slowest.
//
// What async made uncheckable by comparison, the log makes checkable by replay: every server
// records each gradient it received (worker, step, batch, the version of every server's range it
// was computed on) and which update used it. replay_ps() recomputes those gradients in one
// process from the logged versions and applies them in the logged order; it must reach the
// servers' final parameters bit for bit (the same operations in the same order). A gradient
// corrupted, dropped, duplicated or reordered on its way changes what the servers hold, or the
// log itself, and fails the audit.
//
// One class for host and device: every tensor (a worker's parameters and gradient, a server's
// range, optimizer state and owed versions, the payloads of both ways and the headers) lives in
// the communicator's memory and every kernel runs through that memory's table
// (kernels/device/kernel_table.h), a server's sum of its workers' gradients included; a device
// communicator takes device pointers only, so the headers are small device arrays that the host
// fills by upload() and reads by download(). The replay computes on rank 0's memory with the same
// kernels in the same order, so it matches the servers bit for bit on the device too.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "strategies/mlp.h"
#include "strategies/strategy.h"

namespace dts {

enum class PsMode { sync, async, ssp, backup };
std::string_view name(PsMode mode);  // "ps-sync", "ps-async", "ps-ssp", "ps-backup"

// One push as a server received it.
struct PsGradient {
  int64_t arrival = 0;                  // its place among this server's arrivals (0, 1, ...)
  int64_t worker = 0;                   // 0..W-1, from the rank it came from (rank - S)
  int64_t step = 0;                     // the worker's step count (its pushes before this one)
  int64_t batch_first = 0, batch_size = 0;  // the global batch it took its rows from
  std::vector<int64_t> versions;        // of each server's range, as the worker computed on them
  int64_t update = -1;                  // the update that used it (its version before); -1: dropped
};

// What one server did: every gradient in arrival order, and each update's gradients in the order
// it summed them. lead: ps-ssp, per reply, how many steps its worker was ahead of the slowest.
struct PsServerLog {
  int64_t server = 0;
  std::vector<PsGradient> gradients;
  std::vector<std::vector<int64_t>> updates;  // indices into gradients
  std::vector<int64_t> lead;
  std::vector<int64_t> serialize() const;
  // Error{invalid_argument} on a record that is not one serialize() wrote for `servers` servers.
  static PsServerLog deserialize(const std::vector<int64_t>& words, int servers);
};

// The replay's input: the run's settings and every server's log.
struct PsReplayInput {
  ModelSpec spec;
  TrainConfig train;
  Precision precision = Precision::f64;
  PsMode mode = PsMode::sync;
  int servers = 1, workers = 1, backup = 0;
  std::vector<PsServerLog> logs;  // one per server, in server order
  Memory memory = Memory::host;   // where the replay computes: the run's (device memory: f32 only)
};

struct PsReplayResult {
  std::string problem;             // the first inconsistency of the logs; "" when they are consistent
  std::vector<double> parameters;  // the replayed final parameters (reference layout); empty on a problem
  int64_t updates = 0, applied = 0, dropped = 0;  // over the servers, per server counted once
  std::vector<double> staleness;   // per applied gradient and server: updates between its version and its use
  std::vector<double> dropped_per_update;  // ps-backup: gradients computed on each version and dropped
};

// One process replays the logs: validates them (every worker's steps seen once each, in order, by
// every server alike; versions that existed when they were used), then recomputes each used
// gradient from the logged versions and applies the updates in the logged order.
PsReplayResult replay_ps(const PsReplayInput& input);

// The update a server applies to its range of n elements: the gradients (its range of each) summed
// in the given order, times `scale` unless it is 1 (in double, rounded once), then one optimizer
// step (step = its count of updates, from 1), all through `table` on its memory (every pointer and
// `scratch` live there). The server and the replay both call it.
template <class T>
void ps_apply(const kernels::KernelTable<T>& table, const TrainConfig& train, T* params, T* state1, T* state2,
              int64_t n, int64_t step, const std::vector<const T*>& gradients, double scale,
              kernels::Array<T>& scratch);

// The messages one rank of a parameter-server layout sends per step (group "ps", send_recv, from
// and to its ranks: servers 0..S-1, then the W workers): a worker a header of 4 + S int64 and its
// gradient's range j (even_split of Psi) to each server j; a server a version (one int64) and its
// range to each worker (a reply per push). expected_traffic() sums its bytes from them; the
// planner (planner/) prices each message on its link.
std::vector<PlannedCall> ps_calls(int64_t psi, int servers, int workers, int rank, DType dtype);

template <class T>
class PsStrategy final : public Strategy {
 public:
  PsStrategy(const ModelSpec& spec, const ParallelConfig& config, Communicator& world, PsMode mode,
             Precision precision);
  ~PsStrategy() override;

  std::string_view name() const override { return dts::name(mode_); }
  StepReport step(const Batch& global_batch) override;
  // Collective: the steps pause (quiesce()), then every server broadcasts its range. Steps may
  // follow: a run can be read between epochs.
  std::vector<double> full_parameters() override;
  MemoryReport memory() const override;
  std::string config() const override { return config_.describe(); }
  std::vector<TrafficTheory> expected_traffic() const override;
  // sync and backup: each server's range and every worker's last pulled copy of it, alike.
  std::vector<ReplicaDigest> replica_digests() override;
  // One worker on host memory: nothing summed in another order than one process (every mode is
  // sync then); the device's kernels sum in their own order.
  int same_order_microbatches() const override { return workers_ == 1 && table_.memory() == Memory::host ? 1 : 0; }
  // async, ssp and backup apply what arrives first; with one worker nothing can arrive out of turn.
  bool order_dependent() const override { return mode_ != PsMode::sync && workers_ > 1; }
  bool lockstep() const override { return !order_dependent(); }
  // A server of a synchronous update reports the mean of its workers' losses weighted by their
  // rows: the batch's loss. A worker reports its own rows'.
  bool reports_batch_loss() const override { return is_server() && !order_dependent(); }
  void set_learning_rate(double lr) override;

  // Collective over the layout, point to point only: the servers' logs and ranges go to rank 0,
  // which replays the logs and compares (filled there; other ranks get ran = false).
  std::optional<ReplayAudit> audit() override;
  bool is_server() const { return rank_ < servers_; }
  // Test hooks: a server that breaks its own contract, so a test can see the checks fail.
  // ignore_bound: ps-ssp replies at once; swap_updates: ps-async logs each pair of updates in
  // the other order than it applied them.
  void plant_fault_for_test(bool ignore_bound, bool swap_updates) {
    ignore_bound_ = ignore_bound;
    swap_updates_ = swap_updates;
  }

 private:
  struct Pending;  // one worker's receives in flight on a server
  // Collective pause between steps: a server serves the pushes still due, sends every reply and
  // takes each worker's pause marker on its posted receives; a worker sends its marker. Nothing
  // is left posted; the next step posts again. Does nothing when no step ran since the last.
  void quiesce();
  StepReport server_step();
  StepReport worker_step(const Batch& batch);
  // Server: tests the workers' receives once; returns the worker whose push completed, or -1.
  int poll();
  void post_receive(int worker);
  // Server: takes worker w's completed push into the log; returns its index there.
  size_t take(int worker, double& loss);
  void reply(int worker, const T* values, int64_t version, StepReport& report);
  // Rank 0 of the audit: receives `count` words from `peer` through a device array where the
  // communicator takes device memory.
  std::vector<int64_t> receive_words(size_t count, int peer);
  void apply(const std::vector<size_t>& used, StepReport& report);
  void release_ssp(StepReport& report);
  // Server: serves pushes until `done`.
  void serve_until(const std::function<bool()>& done, StepReport& report);
  void serve_one(int worker, StepReport& report);
  void trim_history();

  ModelSpec spec_;
  ParallelConfig config_;
  Communicator& world_;
  PsMode mode_;
  Precision precision_;
  int rank_, servers_, workers_;
  int64_t psi_;
  int64_t begin_ = 0, count_ = 0;  // server: its range
  kernels::KernelTable<T> table_;  // of the communicator's memory: every tensor below lives there
  // Worker: the whole model; server: its range, optimizer state and the versions still owed.
  std::unique_ptr<Mlp<T>> mlp_;
  kernels::Array<T> params_, grads_, state1_, state2_, scratch_;
  kernels::Array<int64_t> header_, reply_versions_;  // worker: its push's header, the replies' versions
  std::vector<int64_t> versions_;  // worker: the version of each server's range it holds (host copy)
  int64_t worker_steps_ = 0;
  // Server state.
  int64_t version_ = 0, server_steps_ = 0, served_ = 0;
  std::vector<std::unique_ptr<Pending>> pending_;
  std::vector<int64_t> pushes_;                 // per worker: pushes served
  std::vector<int> waiting_;                    // ssp: workers whose reply is held back
  std::deque<kernels::Array<T>> history_;       // backup/sync: versions history_base_.. still owed
  int64_t history_base_ = 0;
  std::vector<int64_t> owed_version_;           // per worker: the version of the last reply (what it computes on)
  std::vector<size_t> fresh_;                   // sync/backup: pushes of the current version, by log index
  int poll_start_ = 0;                          // round robin over the workers' receives
  bool running_ = false;                        // a step ran since the start or the last quiesce()
  PsServerLog log_;
  bool ignore_bound_ = false, swap_updates_ = false;
  int64_t history_peak_ = 0, activations_peak_ = 0;
  double loss_sum_ = 0;
  int64_t loss_count_ = 0;
};

extern template class PsStrategy<float>;
extern template class PsStrategy<double>;

}  // namespace dts

// The Suite interface (what is checked and measured), its options, the context the harness
// hands to each case, and the suite registry. Suites never include harness headers: the harness
// implements RunContext.
#pragma once
#include <any>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "core/dtype.h"
#include "results/record.h"

namespace dts {

// Everything `dtsuite run` was asked to do. Flags mirror nccl-tests where they overlap.
struct RunOptions {
  std::vector<std::string> suites;
  std::string backend = "mpi";
  std::string device = "cpu";
  int64_t min_bytes = 8;                       // -b
  int64_t max_bytes = int64_t{1} << 20;        // -e
  double factor = 8;                           // -f
  int iters = 20;                              // -n
  int warmup = 5;                              // -w
  std::vector<DType> dtypes{kAllDTypes.begin(), kAllDTypes.end()};          // -d
  std::vector<ReduceOp> ops{kAllReduceOps.begin(), kAllReduceOps.end()};    // -o
  std::vector<std::string> collectives;        // --collective; empty: all
  int root = -1;                               // -r; -1: sweep every root
  bool check = true;                           // -c
  double timeout_seconds = 300;                // -T; 0: no watchdog
  uint64_t seed = 1;
  bool quick = false;
  int world_size = 1;                          // filled by the harness
  // Training suites (equivalence, later scaling and convergence).
  // --strategy: strategy specs, "NAME" or "NAME(key=value,...)" (strategies/strategy_spec.h); empty:
  // every registered one, each at every layout the job's ranks allow.
  std::vector<std::string> strategies;
  int steps = 5;                               // --steps: training steps compared
  int batch = 64;                              // --batch: global batch rows
  int layers = 3, width = 64, input = 32, classes = 10;  // --layers --width --input --classes
  int accumulation = 1;                        // --accumulation: micro-batches per step (ddp, zero)
  int microbatches = 4;                        // --microbatches: pipeline micro-batches per step (gpipe, 1f1b, hybrid)
  std::string optimizer = "sgd,adamw";         // --optimizer: sgd, adamw, or both comma-separated
};

// One unit of work: a collective at one dtype/op/root/size, a strategy at one world size, ...
struct Case {
  std::string id;   // hierarchical: "all_reduce/f32/sum/1048576"
  Labels labels;    // what the case is about (op, dtype, bytes, config, ...); on every record of it
  std::any params;  // suite-private description
};

class RunContext {
 public:
  virtual ~RunContext() = default;
  virtual Communicator& comm() = 0;     // the stack under test
  // An untampered MPI communicator over the same ranks: verification results and timings are
  // gathered through it, never through the stack under test (a faulty stack must not be able
  // to corrupt its own verdict).
  virtual Communicator& control() = 0;
  virtual const RunOptions& options() const = 0;
  virtual Memory memory() const = 0;   // where the case's buffers must live
  // Barrier, `warmup` untimed iterations, then `iters` timed ones. Returns, on rank 0, the time
  // of each iteration as the slowest rank saw it (seconds); other ranks get an empty vector.
  virtual std::vector<double> time_iterations(int warmup, int iters, const std::function<void()>& iteration) = 0;
  // This rank's traffic through the stack under test so far (OpObserver counters): bytes handed
  // to point-to-point sends, and library collectives whose wire volume is opaque.
  struct Traffic {
    int64_t bytes_sent = 0, opaque_collectives = 0;
  };
  virtual Traffic traffic() const = 0;
  // Who took part in a case that ran on a sub-world (a communicator split from comm()): the
  // members' count, the nodes they span and the most members on one node. Collective over
  // control(): every rank of the job calls it, `member` true on the ranks that took part. A
  // suite puts the result in its records' labels (world_size, nodes, ranks_per_node) and the
  // job's size in config (`job=N`); labels it leaves at 0 get the whole job's.
  struct Participants {
    int world_size = 0, nodes = 0, ranks_per_node = 0;
  };
  virtual Participants participants(bool member) = 0;
  // Hands a record to the sinks (rank 0 only; other ranks' records are dropped). The harness
  // adds the stack identity labels, run id and timestamp.
  virtual void emit(Record record) = 0;
};

class Suite {
 public:
  virtual ~Suite() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view summary() const = 0;
  virtual std::vector<Case> plan(const RunOptions& options) const = 0;  // expand sweeps
  virtual void run(const Case& c, RunContext& context) = 0;              // emits Records
};

using SuiteFactory = std::function<std::unique_ptr<Suite>()>;
bool register_suite(std::string name, SuiteFactory factory);
std::vector<std::string> registered_suites();
std::unique_ptr<Suite> make_suite(std::string_view name);  // Error{invalid_argument} if unknown

#define DTS_REGISTER_SUITE(CLASS, NAME)                                                   \
  static const bool DTS_REGISTER_CONCAT(dts_suite_registered_, __LINE__) =               \
      ::dts::register_suite(NAME, [] { return std::unique_ptr<::dts::Suite>(new CLASS()); })

}  // namespace dts

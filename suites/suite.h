// The Suite interface (what is checked and measured), its options, the context the harness
// hands to each case, and the suite registry. Suites never include harness headers: the harness
// implements RunContext.
#pragma once
#include <any>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "comm/topology.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/input_file.h"
#include "results/catalog.h"
#include "results/output_paths.h"
#include "results/record.h"
#include "suites/memory_fit.h"

namespace CLI {
class App;
}

namespace dts {

struct RunOptions;

// A suite's own `run` flags, declared beside its code and registered with DTS_REGISTER_FLAGS:
// `declare` adds them to the suite's CLI11 option group before parsing (binding them to the
// group's members), `finish` checks and completes them after parsing, before MPI starts (throw
// Error{invalid_argument}: one line, exit 2). Several suites may read one group ("training").
class FlagGroup {
 public:
  virtual ~FlagGroup() = default;
  virtual void declare(CLI::App& group) = 0;
  virtual void finish(const RunOptions& common) { (void)common; }
  // One line for the run's preamble ("# minBytes 8 maxBytes ..."); empty: none.
  virtual std::string describe() const { return {}; }
  // The files these flags name for reading ({"--data", path}): no output of the run may be one of
  // them (results/output_paths.h, check_outputs).
  virtual std::vector<NamedPath> input_files() const { return {}; }
};

// Everything `dtsuite run` was asked to do: the flags every suite shares; each suite's own are in
// `flags`, by group name (flags<T>() below).
struct RunOptions {
  std::vector<std::string> suites;
  std::string backend = "mpi";
  std::string device = "auto";                 // --device; resolved to "cpu" or "cuda" by the harness
  std::string node;                            // --node: this rank's node name (comm/topology.h)
  int iters = 20;                              // -n
  int warmup = 5;                              // -w
  bool check = true;                           // -c N, N > 0
  int checks = 1;                              // -c N: checked iterations per case (collectives)
  double timeout_seconds = 300;                // -T; 0: no watchdog
  uint64_t seed = 1;
  int repeat = 1;                              // --repeat: passes over the plan, each in its own order
  bool quick = false;
  int world_size = 1;                          // filled by the harness
  int ranks_on_node = 1;                       // filled by the harness: ranks sharing this rank's node
  // What a rank may allocate, one figure for the whole job: the harness sets the least of the
  // ranks' memory_available_per_rank on every rank, so that every rank's plan() judges a fit
  // alike (MemAvailable moves between two reads; rank 0, which reads the inputs, holds more).
  // Unset (one process, tests): this process's own, read when asked.
  std::optional<MemoryAvailable> memory_available;
  MemoryAvailable memory_per_rank() const {
    return memory_available ? *memory_available : memory_available_per_rank(ranks_on_node);
  }
  std::map<std::string, std::shared_ptr<FlagGroup>> flags_by_group;
  // Reads a file a flag names, once for the whole job. Where the harness sets it, its rank 0
  // reads the file (within `limits`, a FIFO or pipe waited on at most -T) and every rank gets
  // the same bytes, so that a FIFO or pipe (`--data <(zcat x.gz)`) is read once rather than split
  // between ranks; collective then: every rank calls it, in the same order (as plan() runs), and
  // every rank throws the same Error. Unset (one process, tests): read here.
  std::function<std::string(const std::string& path, const std::string& what, InputLimits limits)> read_input;
  std::string read_shared_input(const std::string& path, const std::string& what, InputLimits limits) const {
    return read_input ? read_input(path, what, limits) : read_input_file(path, what, limits);
  }

  // The parsed flags of group T (T::kGroup names it). Error{invalid_argument} when this build
  // has no such group (a suite reading a group nobody registered: found by its first test).
  template <class T>
  const T& flags() const {
    auto it = flags_by_group.find(T::kGroup);
    const T* group = it == flags_by_group.end() ? nullptr : dynamic_cast<const T*>(it->second.get());
    if (!group) throw Error(Error::Kind::invalid_argument, std::string("no flag group '") + T::kGroup + "' in this build");
    return *group;
  }
  template <class T>
  T& flags() {
    return const_cast<T&>(static_cast<const RunOptions*>(this)->flags<T>());
  }
};

// One unit of work: a collective at one dtype/op/root/size, a strategy at one world size, ...
struct Case {
  std::string id;   // hierarchical: "all_reduce/f32/sum/1048576"
  Labels labels;    // what the case is about (op, dtype, bytes, config, ...); on every record of it
  std::any params;  // suite-private description
  // Seconds the case may take in all; 0: the run's -T. A case that legitimately runs long (a
  // training run) states its own, and the watchdog then judges a hang by -T without progress
  // (no call into the stack or the harness's communicators) rather than by the case's age.
  double time_budget_seconds = 0;
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
  // Runs `host_work`, this rank's own work on a case's data on the host (writing inputs, checking
  // a result; no call into comm() or control()), off the watchdog's clock: -T bounds the stack's
  // calls, not work whose time grows with the data (minutes for a few GiB). Returns its seconds.
  virtual double off_the_clock(const std::function<void()>& host_work) {
    const auto start = std::chrono::steady_clock::now();
    host_work();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  // This rank's traffic through the stack under test so far (OpObserver counters): bytes handed
  // to point-to-point sends, and library collectives whose wire volume is opaque.
  struct Traffic {
    int64_t bytes_sent = 0, opaque_collectives = 0, bytes_received = 0;
  };
  virtual Traffic traffic() const = 0;
  // Where this rank is in a sequence of the case's own (the replay: the trace operation it
  // issues), for the watchdog's report of a hang ("rank 2 ... at operation #417"). Default: none.
  virtual void at_position(int64_t index) { (void)index; }
  // Who took part in a case that ran on a sub-world (a communicator split from comm()): the
  // members' count, the nodes they span and the most members on one node. Collective over
  // control(): every rank of the job calls it, `member` true on the ranks that took part. A
  // suite puts the result in its records' labels (world_size, nodes, ranks_per_node) and the
  // job's size in config (`job=N`); labels it leaves at 0 get the whole job's.
  struct Participants {
    int world_size = 0, nodes = 0, ranks_per_node = 0;
  };
  virtual Participants participants(bool member) = 0;
  // Where the job's ranks are: each control() rank's node (by host name, or --node / DTS_NODE),
  // this rank's place on its node, and its device. The same on every call.
  struct Topology {
    NodeMap nodes;                      // of control()'s ranks
    int local_rank = 0, local_size = 1;  // this rank among the ranks of its node
    std::string device;                 // "cpu:MODEL" or "cuda:NAME", as the stack identity says
    int cuda_devices = 0;               // CUDA devices this rank sees
  };
  virtual const Topology& topology() const = 0;
  // Hands a record to the sinks (rank 0 only; other ranks' records are dropped). The harness
  // adds the stack identity labels, run id and timestamp.
  virtual void emit(Record record) = 0;
};

class Suite {
 public:
  virtual ~Suite() = default;
  virtual std::string_view name() const = 0;
  virtual std::vector<Case> plan(const RunOptions& options) const = 0;  // expand sweeps
  virtual void run(const Case& c, RunContext& context) = 0;              // emits Records
};

// A suite registers its factory with its catalog entry (results/catalog.h: name, summary,
// metrics, report sections), so the harness, the report and the profile checks know it from
// that one line.
using SuiteFactory = std::function<std::unique_ptr<Suite>()>;
bool register_suite(SuiteInfo info, SuiteFactory factory);
std::vector<std::string> registered_suites();
std::unique_ptr<Suite> make_suite(std::string_view name);  // Error{invalid_argument} if unknown

// Flag groups, by name; every registered group is declared on `run` (CLI11 needs them all to
// parse any command line), each as an option group titled `title` in --help.
using FlagGroupFactory = std::function<std::shared_ptr<FlagGroup>()>;
bool register_flag_group(std::string name, std::string title, FlagGroupFactory factory);
struct FlagGroupEntry {
  std::string name, title;
  FlagGroupFactory make;
};
std::vector<FlagGroupEntry> registered_flag_groups();

#define DTS_REGISTER_SUITE(CLASS, INFO)                                                   \
  static const bool DTS_REGISTER_CONCAT(dts_suite_registered_, __LINE__) =               \
      ::dts::register_suite(INFO, [] { return std::unique_ptr<::dts::Suite>(new CLASS()); })
#define DTS_REGISTER_FLAGS(CLASS, TITLE)                                                  \
  static const bool DTS_REGISTER_CONCAT(dts_flags_registered_, __LINE__) =               \
      ::dts::register_flag_group(CLASS::kGroup, TITLE, [] { return std::make_shared<CLASS>(); })

}  // namespace dts

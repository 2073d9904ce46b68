// The collectives suite: every collective over dtypes, ops, roots and sizes, timed with
// nccl-tests conventions (time, algbw, busbw) and checked on every run (exact inputs bit for bit,
// random inputs against a long double reference, overflow inputs against the stated semantics;
// see check.h), out of place and in place.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "comm/mpi/mpi_communicator.h"
#include "comm/text.h"
#include "core/buffer.h"
#include "core/error.h"
#include "suites/collectives/check.h"
#include "suites/collectives/collective.h"
#include "suites/collectives/datatype_flag.h"
#include "suites/flag_checks.h"
#include "suites/memory_fit.h"
#include "suites/suite.h"

namespace dts {

namespace {

// The suite's flags: nccl-tests' own names (-b -e -f -d -o -r), so its users feel at home.
class CollectivesFlags final : public DatatypeSelection {
 public:
  int64_t min_bytes = 8, max_bytes = int64_t{1} << 20;
  double factor = 8;
  std::vector<DType> dtypes = every_dtype();
  std::vector<ReduceOp> ops{kAllReduceOps.begin(), kAllReduceOps.end()};
  std::vector<Collective> collectives{kAllCollectives.begin(), kAllCollectives.end()};
  int root = -1;  // -1: sweep every root
  // Backend mpi: integer reductions also through the other MPI names of each width (MPI_LONG,
  // MPI_UNSIGNED_LONG_LONG, ...). Off under --quick.
  bool every_mpi_name = true;

  void declare(CLI::App& g) override {
    g.add_option("-b,--minbytes", min_text_, "smallest message size (suffixes K, M, G)")->capture_default_str();
    g.add_option("-e,--maxbytes", max_text_, "largest message size (suffixes K, M, G)")->capture_default_str();
    g.add_option("-f,--stepfactor", factor, "multiplication factor between sizes")
        ->check(FiniteRange(1.0001, 1e6))->capture_default_str();
    g.add_option("-d,--datatype", dtypes_text_,
                 "dtypes, comma-separated, or all: f32,f64,f16,bf16,i8,u8,i32,u32,i64,u64,f8e4m3,f8e5m2; the "
                 "collectives run each, equivalence trains in the f32, f64, bf16 among them")
        ->capture_default_str();
    g.add_option("-o,--op", ops_text_, "reduction ops, comma-separated, or all: sum,prod,min,max,avg")->capture_default_str();
    g.add_option("--collective", collectives_text_,
                 "collectives, comma-separated, or all: all_reduce,reduce_scatter,all_gather,broadcast,reduce,"
                 "all_to_all,send_recv")
        ->capture_default_str();
    g.add_option("-r,--root", root, "root of broadcast/reduce; -1 sweeps every root")
        ->check(CLI::Range(-1, 1 << 20))->capture_default_str();
    g.add_option("--mpi-names", mpi_names_text_,
                 "backend mpi: all runs integer reductions through every MPI name of the width too (MPI_LONG, "
                 "MPI_UNSIGNED_LONG_LONG, ...; fixed under --quick), fixed through MPI_INT64_T and the like only")
        ->check(CLI::IsMember({"all", "fixed"}))->capture_default_str();
  }

  void finish(const RunOptions& common) override {
    const bool dtypes_given = dtypes_text_ != "all";  // before --quick narrows "all" for this suite alone
    min_bytes = parse_size(min_text_);
    max_bytes = parse_size(max_text_);
    if (min_bytes > max_bytes) {
      throw Error(Error::Kind::invalid_argument, "-b " + min_text_ + " is larger than -e " + max_text_);
    }
    if (common.quick) {
      // A smoke run: small sizes, three dtypes that cover float/narrow/int paths, two ops.
      max_bytes = std::min<int64_t>(max_bytes, 64 << 10);
      min_bytes = std::min(min_bytes, max_bytes);
      if (dtypes_text_ == "all") dtypes_text_ = "f32,f16,i32";
      if (ops_text_ == "all") ops_text_ = "sum,max";
    }
    dtypes.clear();
    if (dtypes_text_ == "all") {
      dtypes = every_dtype();
    } else {
      for (const auto& d : parse_list(dtypes_text_)) dtypes.push_back(parse_dtype(d));
    }
    ops.clear();
    if (ops_text_ == "all") {
      ops.assign(kAllReduceOps.begin(), kAllReduceOps.end());
    } else {
      for (const auto& op : parse_list(ops_text_)) ops.push_back(parse_reduce_op(op));
    }
    // Two names for one thing (nccl-tests' "float" and "f32") would run its cases twice.
    const auto once = [](const auto& items, const char* flag) {
      for (size_t i = 0; i < items.size(); ++i) {
        for (size_t j = 0; j < i; ++j) {
          if (items[i] == items[j]) {
            throw Error(Error::Kind::invalid_argument, std::string(flag) + " names '" + std::string(name(items[i])) + "' twice");
          }
        }
      }
    };
    once(dtypes, "-d");
    once(ops, "-o");
    requested.reset();
    if (dtypes_given) {
      requested = dtypes;
      // A -d that no suite of the run reads would change nothing: refused, not ignored.
      // (No suites given: the harness runs collectives.)
      const auto reads = [](const std::string& suite) {
        return std::find(std::begin(kReadBy), std::end(kReadBy), suite) != std::end(kReadBy);
      };
      if (!common.suites.empty() && std::none_of(common.suites.begin(), common.suites.end(), reads)) {
        throw Error(Error::Kind::invalid_argument, "-d " + dtypes_text_ +
                                                       ": only the collectives and equivalence suites read -d, and "
                                                       "neither is in this run");
      }
    }
    every_mpi_name = mpi_names_text_ == "all" && !common.quick;
    collectives.clear();
    if (collectives_text_ == "all") {
      collectives.assign(kAllCollectives.begin(), kAllCollectives.end());
    } else {
      for (const auto& c : parse_list(collectives_text_)) collectives.push_back(parse_collective(c));
    }
  }

  // "all": every dtype, fp8 last (its cases SKIP where the backend does not carry it: mpi).
  static std::vector<DType> every_dtype() {
    // One push_back at a time: GCC 12 at -O3 misreports vector::insert of a range as out of bounds.
    std::vector<DType> all;
    for (DType d : kAllDTypes) all.push_back(d);
    for (DType d : kFp8DTypes) all.push_back(d);
    return all;
  }

  std::string describe() const override {
    char line[160];
    std::snprintf(line, sizeof(line), "minBytes %lld maxBytes %lld step: %g(factor)", static_cast<long long>(min_bytes),
                  static_cast<long long>(max_bytes), factor);
    return line;
  }

 private:
  std::string min_text_ = "8", max_text_ = "1M", dtypes_text_ = "all", ops_text_ = "all", collectives_text_ = "all";
  std::string mpi_names_text_ = "all";
};
DTS_REGISTER_FLAGS(CollectivesFlags, "Collectives (nccl-tests' flags)");

struct CollectiveCase {
  Collective collective;
  DType dtype;
  ReduceOp op;
  int root;
  int64_t count;
  // The MPI name the call goes through (mpi backend, integer reductions: MPI_LONG, ...); empty: the
  // backend's default (for mpi the fixed-width name, MPI_INT64_T).
  std::string mpi_datatype;
};

// Counts that always run besides the -b/-e/-f sweep: an empty operation, one element, and a
// prime (1021: not divisible by any rank count up to 1020, so ring segments are uneven).
constexpr int64_t kExtraCounts[] = {0, 1, 1021};

std::vector<int64_t> sweep_bytes(const CollectivesFlags& o) {
  std::vector<int64_t> sizes;
  for (int64_t b = o.min_bytes; b <= o.max_bytes;) {
    sizes.push_back(b);
    const auto next = static_cast<int64_t>(std::floor(static_cast<double>(b) * o.factor));
    b = std::max(next, b + 1);
  }
  return sizes;
}

std::string case_id(const CollectiveCase& c, int world_size) {
  // Appended piece by piece: GCC 12 at -O3 misreports `"/" + std::string` as overlapping memcpy.
  std::string id(name(c.collective));
  id += '/';
  id += name(c.dtype);
  if (is_reducing(c.collective)) {
    id += '/';
    id += name(c.op);
  }
  if (is_rooted(c.collective)) {
    id += "/root";
    id += std::to_string(c.root);
  }
  id += '/';
  id += std::to_string(collective_bytes(c.collective, c.count, static_cast<int64_t>(size_of(c.dtype)), world_size));
  if (!c.mpi_datatype.empty()) {
    id += '/';
    id += c.mpi_datatype;
  }
  return id;
}

// Buffers and pointers of one placement. In place follows NCCL: reduce_scatter's output is the
// rank's slice of the input, all_gather's input is the rank's slice of the output. Buffers live
// where the communicator takes them; in device memory each has a host image, where inputs are
// written before upload() and outputs read after download(), so checks always read host memory.
struct Placement {
  bool in_place = false;
  Buffer storage_in, storage_out;  // storage_out is empty in place
  Buffer image_in, image_out;      // host images of device storage; empty for host storage
  size_t in_offset = 0, out_offset = 0;  // of in and out within their storage
  void* in = nullptr;   // what the communicator reads
  void* out = nullptr;  // and writes

  bool on_device() const { return storage_in.memory() == Memory::device; }
  Buffer& out_storage() { return in_place ? storage_in : storage_out; }
  Buffer& host_of(Buffer& storage) {
    if (!on_device()) return storage;
    return &storage == &storage_in ? image_in : image_out;
  }
  char* host_in() { return static_cast<char*>(host_of(storage_in).data()) + in_offset; }
  char* host_out() { return static_cast<char*>(host_of(out_storage()).data()) + out_offset; }
  // Host images to the device, before a call reads them.
  void upload() {
    if (!on_device()) return;
    storage_in.copy_from_host(image_in.data(), storage_in.bytes());
    if (!in_place) storage_out.copy_from_host(image_out.data(), storage_out.bytes());
  }
  // The output to its host image, after the communicator's work is done (synchronize()).
  void download() {
    if (on_device()) out_storage().copy_to_host(host_of(out_storage()).data(), out_storage().bytes());
  }
};

Placement make_placement(const CheckSpec& spec, bool in_place, int rank, Memory memory) {
  const auto element = static_cast<int64_t>(size_of(spec.dtype));
  const int64_t in_bytes = input_elements(spec) * element, out_bytes = output_elements(spec) * element;
  Placement p;
  p.in_place = in_place;
  if (!in_place) {
    p.storage_in = Buffer(memory, static_cast<size_t>(in_bytes));
    p.storage_out = Buffer(memory, static_cast<size_t>(out_bytes));
  } else {
    p.storage_in = Buffer(memory, static_cast<size_t>(std::max(in_bytes, out_bytes)));
    const auto slice = static_cast<size_t>(static_cast<int64_t>(rank) * spec.count * element);
    if (spec.collective == Collective::reduce_scatter) p.out_offset = slice;
    if (spec.collective == Collective::all_gather) p.in_offset = slice;
  }
  if (memory == Memory::device) {
    p.image_in = Buffer(Memory::host, p.storage_in.bytes());
    if (!in_place) p.image_out = Buffer(Memory::host, p.storage_out.bytes());
  }
  p.in = static_cast<char*>(p.storage_in.data()) + p.in_offset;
  p.out = static_cast<char*>(p.out_storage().data()) + p.out_offset;
  return p;
}

// Writes this rank's inputs for `spec`, marks every output element as not yet written, and puts
// both where the communicator reads them. The writing is the host's, off the watchdog's clock
// (RunContext::off_the_clock); the upload is not. Returns the writing's seconds.
double prepare(RunContext& ctx, const CheckSpec& spec, Placement& p, int rank) {
  const auto element = static_cast<int64_t>(size_of(spec.dtype));
  const int64_t in_bytes = input_elements(spec) * element, out_bytes = output_elements(spec) * element;
  const double seconds = ctx.off_the_clock([&] {
    if (!p.in_place) {
      fill_input(spec, rank, p.host_in());
      fill_sentinel(p.host_out(), out_bytes);
    } else if (spec.collective == Collective::all_gather ||
               (spec.collective == Collective::broadcast && rank != spec.root)) {
      fill_sentinel(p.host_of(p.storage_in).data(), std::max(in_bytes, out_bytes));
      if (spec.collective == Collective::all_gather) fill_input(spec, rank, p.host_in());
    } else {
      fill_input(spec, rank, p.host_in());
    }
  });
  p.upload();
  return seconds;
}

void invoke(Communicator& comm, const CheckSpec& s, const Placement& p) { call_collective(comm, s, p.in, p.out); }

struct Verification {
  int64_t wrong = 0;
  double max_ulp = 0;
  std::string first_wrong;
  DeviationCounts deviations{};  // summed over ranks
  double input_seconds = 0, check_seconds = 0;  // this rank's host work: its inputs, its check
  // By rank of the job: wrong elements each rank received, and (data movement; empty for the
  // reductions) wrong elements that carried each rank's input, wherever they arrived.
  std::vector<int64_t> wrong_at, wrong_from;

  // Another checked iteration's verdict, summed in.
  void add(const Verification& v) {
    wrong += v.wrong;
    max_ulp = std::max(max_ulp, v.max_ulp);
    if (first_wrong.empty()) first_wrong = v.first_wrong;
    for (size_t i = 0; i < kDeviationCount; ++i) deviations[i] += v.deviations[i];
    input_seconds += v.input_seconds;
    check_seconds += v.check_seconds;
    const auto sum_into = [](std::vector<int64_t>& to, const std::vector<int64_t>& from) {
      if (to.size() < from.size()) to.resize(from.size(), 0);
      for (size_t i = 0; i < from.size(); ++i) to[i] += from[i];
    };
    sum_into(wrong_at, v.wrong_at);
    sum_into(wrong_from, v.wrong_from);
  }
};

// Runs one call on fresh inputs of `kind` (of checked iteration `round`: each its own seed),
// checks every rank's output and combines the verdicts on rank 0 through the control communicator.
Verification verify(RunContext& ctx, CheckSpec spec, Placement& p, InputKind kind, int round) {
  Communicator& control = ctx.control();
  const int rank = control.rank(), n = control.size();
  spec.kind = kind;
  // Timing inputs use seed * 4; round 0 keeps the seeds of -c 1, later rounds step away from them
  // by a large odd constant (the golden ratio's, 2^64 / phi), so no two rounds share inputs.
  spec.seed = ctx.options().seed * 4 + 1 + static_cast<uint64_t>(kind) +
              static_cast<uint64_t>(round) * 0x9E3779B97F4A7C15ull;
  Verification v;
  v.input_seconds = prepare(ctx, spec, p, rank);
  invoke(ctx.comm(), spec, p);
  ctx.comm().synchronize();
  p.download();
  CheckResult local;
  v.check_seconds = ctx.off_the_clock([&] { local = check_output(spec, rank, p.host_out()); });
  control.all_reduce(&local.wrong, &v.wrong, 1, DType::i64, ReduceOp::sum);
  control.all_reduce(&local.max_ulp, &v.max_ulp, 1, DType::f64, ReduceOp::max);
  control.all_reduce(local.deviations.data(), v.deviations.data(), kDeviationCount, DType::i64, ReduceOp::sum);
  // Who received the wrong elements, and whose inputs they carried: one slot per rank, summed.
  const auto un = static_cast<size_t>(n);
  std::vector<int64_t> at(un, 0), from(un, 0);
  at[static_cast<size_t>(rank)] = local.wrong;
  if (!local.wrong_from.empty()) from = local.wrong_from;
  v.wrong_at.assign(un, 0);
  v.wrong_from.assign(un, 0);
  control.all_reduce(at.data(), v.wrong_at.data(), un, DType::i64, ReduceOp::sum);
  control.all_reduce(from.data(), v.wrong_from.data(), un, DType::i64, ReduceOp::sum);
  if (is_reducing(spec.collective)) v.wrong_from.clear();
  const int mine = local.wrong > 0 ? rank : n;
  int first = n;
  control.all_reduce(&mine, &first, 1, DType::i32, ReduceOp::min);
  if (first < n) v.first_wrong = text_to_root(control, first, local.first_wrong);
  return v;
}

// "rank 2 (node n1)".
std::string rank_and_node(int rank, const NodeMap& nodes) {
  std::string text = "rank " + std::to_string(rank);
  if (static_cast<size_t>(rank) < nodes.names.size()) text += " (node " + nodes.names[static_cast<size_t>(rank)] + ")";
  return text;
}

// "ranks 0 (3), 2 (1)": the ranks with a nonzero count, and their counts.
std::string ranks_with_counts(const std::vector<int64_t>& counts) {
  std::string text;
  int named = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] == 0) continue;
    text += (named++ ? ", " : "") + std::to_string(r) + " (" + std::to_string(counts[r]) + ")";
  }
  return (named == 1 ? "rank " : "ranks ") + text;
}

// Which rank a case's wrong elements point at, from every checked iteration of it (rank 0):
//  - all_reduce, all_gather and broadcast hand every rank the same output: when one rank alone
//    received wrong elements, its peers got the same elements right, and that rank is the
//    suspect (its link in, its memory, its reduction);
//  - data movement (all_gather, broadcast, all_to_all, send_recv) puts one rank's input in each
//    output block: when every wrong element carried one rank's input, arriving at several ranks,
//    that rank is the suspect (its link out, its send buffer); when one rank's input arrived
//    wrong at one other rank only (all_to_all, send_recv), the path between the two;
//  - else no one is singled out, and the ranks that received them are listed. That is always so
//    for reduce (only the root's output is defined) and reduce_scatter (each element arrives at
//    one rank), and for the reductions no element says whose input was wrong: each holds every
//    rank's. A stack that is wrong alike on every rank (a library's semantics) singles out none.
// `rounds_wrong_at`: the checked iterations (of `rounds`) in which each rank received a wrong element.
std::string suspect_text(Collective collective, const Verification& all, const std::vector<int64_t>& rounds_wrong_at,
                         int rounds, const NodeMap& nodes) {
  const auto only = [](const std::vector<int64_t>& counts) {
    int found = -1;
    for (size_t r = 0; r < counts.size(); ++r) {
      if (counts[r] == 0) continue;
      if (found >= 0) return -1;
      found = static_cast<int>(r);
    }
    return found;
  };
  const bool replicated = collective == Collective::all_reduce || collective == Collective::all_gather ||
                          collective == Collective::broadcast;
  const int at = only(all.wrong_at), from = all.wrong_from.empty() ? -1 : only(all.wrong_from);
  if (all.wrong_at.size() == 1) return "at " + rank_and_node(0, nodes) + ", the job's only rank";
  if (at >= 0 && (replicated || at == from)) {
    const auto r = static_cast<size_t>(at);
    return "suspect: " + rank_and_node(at, nodes) + ", the only rank that received wrong elements (" +
           std::to_string(all.wrong_at[r]) + " in " + std::to_string(rounds_wrong_at[r]) + " of " +
           std::to_string(rounds) + " checked iterations)";
  }
  if (from >= 0 && at < 0) {
    return "suspect: " + rank_and_node(from, nodes) + ", whose data arrived wrong at " + ranks_with_counts(all.wrong_at);
  }
  if (from >= 0 && at >= 0) {
    return "suspect: the path from " + rank_and_node(from, nodes) + " to " + rank_and_node(at, nodes) + " (" +
           std::to_string(all.wrong_at[static_cast<size_t>(at)]) + " wrong elements)";
  }
  std::string text = "no one rank singled out: wrong elements received at " + ranks_with_counts(all.wrong_at);
  if (!all.wrong_from.empty()) text += ", carrying the data of " + ranks_with_counts(all.wrong_from);
  return text;
}

// "overflow inputs: 6 wrong (integers wrap, ...): saturates at 127: 6" for the `wrong` row's detail.
std::string verification_text(const CheckSpec& spec, InputKind kind, const Verification& v) {
  const bool reducing = is_reducing(spec.collective);
  const bool bounded = reducing && is_floating(spec.dtype) && spec.op != ReduceOp::min && spec.op != ReduceOp::max;
  std::string how = "bit for bit";
  if (kind == InputKind::random && bounded) how = "bound (ceil(log2 n)+1)*eps*sum|x|";
  if (kind == InputKind::overflow) {
    // e4m3 has no inf: its overflow is NaN (OCP's non-saturating mode, core/reduce.h).
    const bool no_inf = spec.dtype == DType::f8e4m3;
    how = reducing ? std::string("stated semantics: integers wrap, floats reach inf") +
                         (no_inf ? " (f8e4m3 NaN, non-saturating)" : "") + ", NaN propagates through every op"
                   : "every bit pattern, bit for bit";
  }
  std::string text = std::string(name(kind)) + " inputs: " + std::to_string(v.wrong) + " wrong (" + how + ")";
  if (v.wrong > 0) text += ": " + describe(v.deviations, spec.dtype, spec.op, reducing);
  return text;
}

Labels case_labels(const CollectiveCase& c, int world_size) {
  Labels l;
  l.op = std::string(name(c.collective));
  l.dtype = std::string(name(c.dtype));
  l.bytes = collective_bytes(c.collective, c.count, static_cast<int64_t>(size_of(c.dtype)), world_size);
  l.config = "redop=" + std::string(is_reducing(c.collective) ? name(c.op) : "none") + ";root=" +
             std::to_string(c.root) + ";count=" + std::to_string(c.count);
  if (!c.mpi_datatype.empty()) l.config += ";mpi_datatype=" + c.mpi_datatype;
  return l;
}

// The names besides the default that the plan runs `dtype` through: the mpi backend's other MPI
// names of an integer dtype (mpi_datatype_names), for reductions, unless --mpi-names fixed or
// --quick; none for any other backend, which has one name per dtype.
std::vector<std::string> other_mpi_names(const RunOptions& common, Collective coll, DType dtype) {
  const CollectivesFlags& o = common.flags<CollectivesFlags>();
  if (common.backend != "mpi" || !o.every_mpi_name || !is_reducing(coll) || is_floating(dtype)) return {};
  std::vector<std::string> names = mpi_datatype_names(dtype, true);
  if (!names.empty()) names.erase(names.begin());  // the default, which the plain case runs
  return names;
}

// A case's calls of `dtype` through `name` for the guard's life, then the default again.
class DatatypeName {
 public:
  DatatypeName(Communicator& comm, DType dtype, const std::string& name) : comm_(comm), dtype_(dtype) {
    if (name.empty()) return;
    comm_.use_datatype_name(dtype, name);
    chosen_ = true;
  }
  ~DatatypeName() {
    if (chosen_) comm_.use_datatype_name(dtype_, "");  // "" never throws
  }
  DatatypeName(const DatatypeName&) = delete;
  DatatypeName& operator=(const DatatypeName&) = delete;

 private:
  Communicator& comm_;
  DType dtype_;
  bool chosen_ = false;
};

class CollectivesSuite final : public Suite {
 public:
  std::string_view name() const override { return "collectives"; }

  std::vector<Case> plan(const RunOptions& common) const override {
    const CollectivesFlags& o = common.flags<CollectivesFlags>();
    const int n = common.world_size;
    if (o.root >= n) {
      throw Error(Error::Kind::invalid_argument,
                  "-r " + std::to_string(o.root) + " is not a rank of this " + std::to_string(n) + "-rank job");
    }
    std::vector<Case> cases;
    // Before anything is allocated: a case's placement holds, in host memory, its input and its
    // output (out of place; in place the larger of the two; on a device the host images, as
    // large), and the check computes the reference element by element: (in + out) x element
    // bytes per rank, the largest case's.
    double largest = 0;
    std::string largest_case;
    for (Collective coll : o.collectives) {
      for (DType dtype : o.dtypes) {
        const auto element = static_cast<int64_t>(size_of(dtype));
        std::set<int64_t> counts(std::begin(kExtraCounts), std::end(kExtraCounts));
        for (int64_t bytes : sweep_bytes(o)) {
          const int64_t count = bytes / (element * (count_is_per_rank(coll) ? n : 1));
          if (count > 0) counts.insert(count);
        }
        const CheckSpec widest{coll, dtype, ReduceOp::sum, 0, *counts.rbegin(), n, 0, InputKind::exact};
        const double held = static_cast<double>(element) *
                            (static_cast<double>(input_elements(widest)) + static_cast<double>(output_elements(widest)));
        if (held > largest) {
          largest = held;
          largest_case = std::string(dts::name(coll)) + " " + std::string(dts::name(dtype)) + " of " +
                         format_bytes(static_cast<double>(collective_bytes(coll, widest.count, element, n)));
        }
        std::vector<ReduceOp> ops = is_reducing(coll) ? o.ops : std::vector<ReduceOp>{ReduceOp::sum};
        std::vector<int> roots{-1};
        if (is_rooted(coll)) {
          roots.clear();
          for (int r = 0; r < n; ++r) {
            if (o.root < 0 || o.root == r) roots.push_back(r);
          }
        }
        for (ReduceOp op : ops) {
          for (int root : roots) {
            for (int64_t count : counts) {
              CollectiveCase c{coll, dtype, op, root, count, {}};
              cases.push_back(Case{case_id(c, n), case_labels(c, n), c});
              // The mpi backend's other names of this dtype (MPI_LONG beside MPI_INT64_T, ...):
              // a library can be right for one and wrong for another. Reductions, full plan only.
              for (const std::string& alias : other_mpi_names(common, coll, dtype)) {
                c.mpi_datatype = alias;
                cases.push_back(Case{case_id(c, n), case_labels(c, n), c});
              }
            }
          }
        }
      }
    }
    check_fits("collectives: " + largest_case + " on " + std::to_string(n) + " ranks", largest,
               "its input and output buffers, out of place", common.memory_per_rank(),
               "lower -e (--maxbytes)");
    return cases;
  }

  void run(const Case& the_case, RunContext& ctx) override {
    const auto& c = std::any_cast<const CollectiveCase&>(the_case.params);
    const RunOptions& o = ctx.options();
    Communicator& comm = ctx.comm();
    const DatatypeName through(comm, c.dtype, c.mpi_datatype);
    const int n = comm.size(), rank = comm.rank();
    const CheckSpec spec{c.collective, c.dtype, c.op, c.root, c.count, n, o.seed * 4, InputKind::exact};
    const int64_t bytes = collective_bytes(c.collective, c.count, static_cast<int64_t>(size_of(c.dtype)), n);
    const double factor = bus_bandwidth_factor(c.collective, n);

    Record base;
    base.suite = "collectives";
    base.case_id = the_case.id;
    base.labels = the_case.labels;

    for (bool in_place : {false, true}) {
      Placement p = make_placement(spec, in_place, rank, ctx.memory());
      double timing_inputs = prepare(ctx, spec, p, rank);  // exact inputs of their own seed
      // -c N: N checked iterations, interleaved with the timed ones (iters split into N runs of
      // timed calls, as evenly as they go, a checked iteration after each), so a fault that comes
      // and goes meets a check wherever it falls in the case. -c 1: all timed, then one check.
      const int rounds = o.check ? std::max(o.checks, 1) : 0, chunks = std::max(rounds, 1);
      std::vector<double> times;
      std::array<Verification, kAllInputKinds.size()> checked;  // by InputKind, over every round
      std::vector<int64_t> rounds_wrong_at(static_cast<size_t>(n), 0);  // rounds in which each rank got one wrong
      for (int k = 0; k < chunks; ++k) {
        const int take = static_cast<int>(static_cast<int64_t>(o.iters) * (k + 1) / chunks -
                                          static_cast<int64_t>(o.iters) * k / chunks);
        if (k > 0 && take > 0) timing_inputs += prepare(ctx, spec, p, rank);  // a check left its inputs there
        if (take > 0 || k == 0) {
          const std::vector<double> part = ctx.time_iterations(k == 0 ? o.warmup : 0, take, [&] { invoke(comm, spec, p); });
          times.insert(times.end(), part.begin(), part.end());
        }
        if (k >= rounds) continue;
        std::vector<bool> hit(static_cast<size_t>(n), false);
        for (InputKind kind : kAllInputKinds) {
          const Verification v = verify(ctx, spec, p, kind, k);
          for (size_t r = 0; r < v.wrong_at.size(); ++r) hit[r] = hit[r] || v.wrong_at[r] > 0;
          checked[static_cast<size_t>(kind)].add(v);
        }
        for (size_t r = 0; r < hit.size(); ++r) rounds_wrong_at[r] += hit[r] ? 1 : 0;
      }
      if (rank != 0) continue;
      Record r = base;
      r.labels.placement = in_place ? "in_place" : "out_of_place";
      const Stats time = compute_stats(times);
      const auto b = static_cast<double>(bytes);
      Record timed = r;
      timed.samples = times;  // per iteration, for `compare --samples`; algbw/busbw follow from them
      emit(ctx, std::move(timed), "time", "seconds", time.median, time);
      const Stats algbw = invert_stats(time, b);
      emit(ctx, r, "algbw", "bytes_per_second", algbw.median, algbw);
      const Stats busbw = scale_stats(algbw, factor);
      emit(ctx, r, "busbw", "bytes_per_second", busbw.median, busbw);
      if (!o.check) continue;
      Record wrong = r;
      wrong.metric = "wrong";
      wrong.unit = "elements";
      wrong.threshold = 0;
      wrong.value = 0;
      wrong.detail.clear();
      std::string first;
      for (InputKind kind : kAllInputKinds) {
        const Verification& v = checked[static_cast<size_t>(kind)];
        wrong.value += static_cast<double>(v.wrong);
        wrong.detail += (wrong.detail.empty() ? "" : "; ") + verification_text(spec, kind, v);
        if (first.empty()) first = v.first_wrong;  // of the first input set with a wrong element
      }
      wrong.verdict = wrong.value == 0 ? Verdict::pass : Verdict::fail;
      if (rounds > 1) wrong.detail = std::to_string(rounds) + " checked iterations: " + wrong.detail;
      if (!first.empty()) wrong.detail += "; first: " + first;
      if (wrong.value > 0) {
        Verification all;
        for (const Verification& v : checked) all.add(v);
        wrong.detail += "; " + suspect_text(c.collective, all, rounds_wrong_at, rounds, ctx.topology().nodes);
      }
      ctx.emit(wrong);
      Record ulp = r;
      ulp.metric = "max_ulp";
      ulp.unit = "ulp";
      // Exact and random inputs only: an overflow input's error is infinite whenever it is wrong.
      ulp.value = std::max(checked[static_cast<size_t>(InputKind::exact)].max_ulp,
                           checked[static_cast<size_t>(InputKind::random)].max_ulp);
      ulp.verdict = Verdict::info;
      double input_seconds = timing_inputs, check_seconds = 0;
      for (const Verification& v : checked) {
        input_seconds += v.input_seconds;
        check_seconds += v.check_seconds;
      }
      // Off the watchdog's clock (-T): said here, so that slow host work is seen, not reported hung.
      ulp.detail = "host work off the -T clock on rank 0: inputs " + format_number(input_seconds, "%.3g") +
                   " s, checks " + format_number(check_seconds, "%.3g") + " s";
      ctx.emit(ulp);
    }
  }

 private:
  static void emit(RunContext& ctx, Record r, const char* metric, const char* unit, double value, const Stats& stats) {
    r.metric = metric;
    r.unit = unit;
    r.value = value;
    r.stats = stats;
    r.verdict = Verdict::info;
    ctx.emit(std::move(r));
  }
};

// Latency plots stop at this size: above it a call's time is bandwidth, drawn in busbw.
constexpr int64_t kLatencyMaxBytes = int64_t{64} << 10;

SuiteInfo collectives_info() {
  SuiteInfo info;
  info.name = "collectives";
  info.summary = "every collective x dtype x op x root x size: nccl-tests timing (algbw, busbw) and exact checks";
  info.metrics = {
      {"time", "seconds", "median time of one call, the slowest rank's"},
      {"algbw", "bytes_per_second", "bytes / time"},
      {"busbw", "bytes_per_second", "algbw times nccl-tests' bus factor (2(n-1)/n for all_reduce)"},
      {"wrong", "elements", "wrong output elements, summed over ranks"},
      {"max_ulp", "ulp", "largest output error in units in the last place"},
  };
  info.deviation_kinds = deviation_vocabulary();
  PlotSpec bandwidth;
  bandwidth.metric = "busbw";
  bandwidth.x = PlotSpec::X::bytes;
  bandwidth.split = "op";
  bandwidth.series = {"dtype"};
  bandwidth.exclude = {{"placement", "in_place"}};  // out of place is nccl-tests' headline figure
  bandwidth.id = "busbw-{split}";
  bandwidth.title = "{split}: bus bandwidth (out of place)";
  bandwidth.x_label = "message size (bytes)";
  bandwidth.y_label = "busbw (GB/s)";
  bandwidth.y_scale = 1e9;
  PlotSpec latency = bandwidth;
  latency.metric = "time";
  latency.max_bytes = kLatencyMaxBytes;
  latency.id = "latency-{split}";
  latency.title = "{split}: time per call, sizes up to " + std::to_string(kLatencyMaxBytes >> 10) + " KiB (out of place)";
  latency.y_label = "time (us)";
  latency.y_scale = 1e-6;
  info.sections = {
      {10, "bandwidth", "Bus bandwidth",
       "Bus bandwidth (nccl-tests' busbw: algbw times 2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter "
       "and all_to_all, 1 otherwise) against message size, out of place. Where several records share a size "
       "(reduction ops, roots), their median is drawn.",
       "No collectives rows with busbw in these results.", {bandwidth}},
      {20, "latency", "Latency at small sizes",
       "Median time of one call (the slowest rank's) for messages up to " + std::to_string(kLatencyMaxBytes >> 10) +
           " KiB, out of place.",
       "No collectives rows with time in these results.", {latency}},
  };
  return info;
}

}  // namespace

DTS_REGISTER_SUITE(CollectivesSuite, collectives_info());

}  // namespace dts

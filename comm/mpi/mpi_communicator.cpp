// MPI backend. MPI has no f16/bf16 and no avg: narrow floats travel as 2-byte types reduced by
// user-defined ops (core/reduce.h semantics); avg is MPI_SUM followed by a local divide, as NCCL
// defines it. MPI has no 8-bit float either, and dtsuite no fp8 arithmetic to lend it: fp8 is
// refused (Error{unsupported}, a SKIP) by every operation, before any MPI call, on every rank
// alike. Every MPI return code is translated here, with MPI's own message and file:line.
#include "comm/mpi/mpi_communicator.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <tuple>
#include <cstring>
#include <mutex>
#include <thread>
#include <optional>
#include <type_traits>
#include <set>
#include <string_view>
#include <unistd.h>
#include <utility>

#include "comm/mpi_support.h"
#include "core/reduce.h"

namespace dts {

namespace {

int64_t bytes_of(size_t count, DType dtype) { return static_cast<int64_t>(count * size_of(dtype)); }
// The bytes a completed receive's status says arrived, in `dtype`'s elements.
void count_status_received(OpObserver* observer, const MPI_Status& status, MPI_Datatype type, DType dtype) {
  if (!observer) return;
  int elements = 0;
  if (MPI_Get_count(&status, type, &elements) != MPI_SUCCESS || elements == MPI_UNDEFINED) return;
  count_received(observer, static_cast<int64_t>(elements) * static_cast<int64_t>(size_of(dtype)));
}

constexpr int kFixedMajor = 4, kFixedMinor = 1, kFixedPatch = 2;

#define DTS_MPI_CHECK(call) check_mpi((call), #call)

// Types and user ops for f16 and bf16, created once per process after MPI_Init.
struct NarrowFloatTypes {
  MPI_Datatype f16 = MPI_DATATYPE_NULL, bf16 = MPI_DATATYPE_NULL;
  MPI_Op ops[2][5] = {};  // [0: f16, 1: bf16][ReduceOp]
};

template <DType kType, ReduceOp kOp>
void narrow_op(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_into(kType, kOp, inout, in, static_cast<size_t>(*len));
}

template <DType kType>
void create_ops(MPI_Op* ops) {
  DTS_MPI_CHECK(MPI_Op_create(&narrow_op<kType, ReduceOp::sum>, 1, &ops[0]));
  DTS_MPI_CHECK(MPI_Op_create(&narrow_op<kType, ReduceOp::prod>, 1, &ops[1]));
  DTS_MPI_CHECK(MPI_Op_create(&narrow_op<kType, ReduceOp::min>, 1, &ops[2]));
  DTS_MPI_CHECK(MPI_Op_create(&narrow_op<kType, ReduceOp::max>, 1, &ops[3]));
  ops[4] = ops[0];  // avg = sum, then divide
}

const NarrowFloatTypes& narrow_types() {
  static const NarrowFloatTypes types = [] {
    NarrowFloatTypes t;
    DTS_MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &t.f16));
    DTS_MPI_CHECK(MPI_Type_commit(&t.f16));
    DTS_MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &t.bf16));
    DTS_MPI_CHECK(MPI_Type_commit(&t.bf16));
    create_ops<DType::f16>(t.ops[0]);
    create_ops<DType::bf16>(t.ops[1]);
    return t;
  }();
  return types;
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::f16: return narrow_types().f16;
    case DType::bf16: return narrow_types().bf16;
    case DType::i8: return MPI_INT8_T;
    case DType::u8: return MPI_UINT8_T;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    case DType::u32: return MPI_UINT32_T;
    case DType::u64: return MPI_UINT64_T;
    case DType::f8e4m3:
    case DType::f8e5m2:
      throw Error(Error::Kind::unsupported,
                  "backend mpi has no " + std::string(name(dtype)) + ": MPI defines no 8-bit floating-point type");
  }
  return MPI_DATATYPE_NULL;
}

// Every name MPI gives an integer dtype on this platform: the fixed-width name first (the default),
// then the C names of the same width and signedness (MPI-4.0 §3.2.2, §6.9.2's "C integer" group).
// MPI_CHAR is a character, not an integer, and the standard does not define reductions on it: it
// is listed for data movement only.
struct NamedType {
  DType dtype;
  const char* name;
  MPI_Datatype type;
  bool reducible;
};

const std::vector<NamedType>& named_types() {
  static const std::vector<NamedType> types = [] {
    std::vector<NamedType> t{
        {DType::i8, "MPI_INT8_T", MPI_INT8_T, true},       {DType::i8, "MPI_SIGNED_CHAR", MPI_SIGNED_CHAR, true},
        {DType::u8, "MPI_UINT8_T", MPI_UINT8_T, true},     {DType::u8, "MPI_UNSIGNED_CHAR", MPI_UNSIGNED_CHAR, true},
        {DType::i32, "MPI_INT32_T", MPI_INT32_T, true},    {DType::u32, "MPI_UINT32_T", MPI_UINT32_T, true},
        {DType::i64, "MPI_INT64_T", MPI_INT64_T, true},    {DType::u64, "MPI_UINT64_T", MPI_UINT64_T, true},
    };
    t.push_back({std::is_signed_v<char> ? DType::i8 : DType::u8, "MPI_CHAR", MPI_CHAR, false});
    const auto by_width = [&](size_t bytes, bool is_signed, const char* name, MPI_Datatype type) {
      for (DType d : {DType::i32, DType::i64, DType::u32, DType::u64}) {
        if (size_of(d) == bytes && is_unsigned(d) != is_signed) t.push_back({d, name, type, true});
      }
    };
    by_width(sizeof(int), true, "MPI_INT", MPI_INT);
    by_width(sizeof(unsigned), false, "MPI_UNSIGNED", MPI_UNSIGNED);
    by_width(sizeof(long), true, "MPI_LONG", MPI_LONG);
    by_width(sizeof(unsigned long), false, "MPI_UNSIGNED_LONG", MPI_UNSIGNED_LONG);
    by_width(sizeof(long long), true, "MPI_LONG_LONG", MPI_LONG_LONG);
    by_width(sizeof(unsigned long long), false, "MPI_UNSIGNED_LONG_LONG", MPI_UNSIGNED_LONG_LONG);
    // The fixed-width name of each dtype first, the others in the order above.
    std::stable_sort(t.begin(), t.end(), [](const NamedType& a, const NamedType& b) { return a.dtype < b.dtype; });
    return t;
  }();
  return types;
}

MPI_Op mpi_op(DType dtype, ReduceOp op) {
  if (dtype == DType::f16) return narrow_types().ops[0][static_cast<int>(op)];
  if (dtype == DType::bf16) return narrow_types().ops[1][static_cast<int>(op)];
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return MPI_SUM;
    case ReduceOp::prod: return MPI_PROD;
    case ReduceOp::min: return MPI_MIN;
    case ReduceOp::max: return MPI_MAX;
  }
  return MPI_OP_NULL;
}

// MPI counts are int. Element-wise operations are split into pieces that fit; the others
// report counts past INT_MAX as unsupported (a SKIP) rather than truncating them.
constexpr size_t kMaxPiece = static_cast<size_t>(INT_MAX);

int checked_count(size_t count, std::string_view op) {
  if (count > kMaxPiece) {
    throw Error(Error::Kind::unsupported,
                "mpi: " + std::string(op) + " of " + std::to_string(count) + " elements exceeds MPI's int count");
  }
  return static_cast<int>(count);
}

const char* byte_offset(const void* p, size_t elements, DType dtype) {
  return static_cast<const char*>(p) + elements * size_of(dtype);
}
char* byte_offset(void* p, size_t elements, DType dtype) { return static_cast<char*>(p) + elements * size_of(dtype); }

class MpiWork final : public Work {
 public:
  // `finish` runs once after completion (avg's divide); `received`: a receive of that dtype,
  // whose arrived bytes are counted at completion.
  MpiWork(MPI_Request request, OpObserver* observer, std::function<void()> finish = {},
          std::optional<std::pair<MPI_Datatype, DType>> received = std::nullopt)
      : request_(request), observer_(observer), finish_(std::move(finish)), received_(received) {}
  ~MpiWork() override {
    if (request_ != MPI_REQUEST_NULL) {
      // Abandoning a request in flight would leave MPI writing into freed memory; complete it.
      MPI_Wait(&request_, MPI_STATUS_IGNORE);
    }
  }
  bool test() override {
    if (request_ == MPI_REQUEST_NULL) return true;
    int done = 0;
    MPI_Status status;
    DTS_MPI_CHECK(MPI_Test(&request_, &done, &status));
    if (done) complete(status);
    return done != 0;
  }
  void wait(std::chrono::duration<double> timeout) override {
    if (request_ == MPI_REQUEST_NULL) return;
    const ObservedCall observed(observer_, ObservedOp::wait);
    if (timeout.count() <= 0) {
      MPI_Status status;
      DTS_MPI_CHECK(MPI_Wait(&request_, &status));
      complete(status);
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!test()) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw Error(Error::Kind::timeout, "mpi: operation not complete after " + std::to_string(timeout.count()) + " s");
      }
      std::this_thread::yield();
    }
  }

 private:
  void complete(const MPI_Status& status) {
    request_ = MPI_REQUEST_NULL;
    if (received_) count_status_received(observer_, status, received_->first, received_->second);
    if (finish_) std::exchange(finish_, nullptr)();
  }
  MPI_Request request_;
  OpObserver* observer_;
  std::function<void()> finish_;
  std::optional<std::pair<MPI_Datatype, DType>> received_;
};

}  // namespace

bool mpich_in_place_reduce_crashes(const std::string& version) {
  // "MPICH Version:\t4.0.2": releases before 4.1.2 read a bad address when a non-zero root
  // reduces in place (pmodels/mpich#6540). Derivatives report other names and are not judged.
  const std::string tag = "MPICH Version:";
  if (version.rfind(tag, 0) != 0) return false;
  int major = 0, minor = 0, patch = 0;
  if (std::sscanf(version.c_str() + tag.size(), " %d.%d.%d", &major, &minor, &patch) < 2) return false;
  return std::tie(major, minor, patch) < std::tie(kFixedMajor, kFixedMinor, kFixedPatch);
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string version(text, static_cast<size_t>(length));
  const auto newline = version.find('\n');
  if (newline != std::string::npos) version.resize(newline);
  while (!version.empty() && (version.back() == ' ' || version.back() == '\0')) version.pop_back();
  return version;
}

std::string mpi_settings(const std::vector<std::string>& environment) {
  static const std::set<std::string, std::less<>> kFrameworks = {"pml", "mtl", "btl", "coll", "op", "osc"};
  std::vector<std::string> settings;
  for (const std::string& entry : environment) {
    const size_t equals = entry.find('=');
    if (equals == std::string::npos) continue;
    const std::string_view key(entry.data(), equals);
    const std::string value = entry.substr(equals + 1);
    constexpr std::string_view kOmpi = "OMPI_MCA_", kMpich = "MPIR_CVAR_";
    if (key.starts_with(kOmpi)) {
      const std::string_view name = key.substr(kOmpi.size());
      if (kFrameworks.count(name) || name.starts_with("coll_tuned_")) settings.push_back(std::string(name) + "=" + value);
    } else if (key.starts_with(kMpich) && key.size() > kMpich.size()) {
      settings.push_back(std::string(key.substr(kMpich.size())) + "=" + value);
    }
  }
  std::sort(settings.begin(), settings.end());
  std::string text;
  for (const std::string& s : settings) text += (text.empty() ? "" : ";") + s;
  return text;
}

std::string mpi_settings() {
  std::vector<std::string> environment;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) environment.emplace_back(*e);
  return mpi_settings(environment);
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string spec, std::shared_ptr<OpObserver> observer)
    : comm_(comm),
      spec_(std::move(spec)),
      observer_(std::move(observer)),
      in_place_reduce_crashes_(mpich_in_place_reduce_crashes(mpi_library_version())) {
  chosen_.fill(MPI_DATATYPE_NULL);
  DTS_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  DTS_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  DTS_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::string MpiCommunicator::version() const { return mpi_library_version(); }

void MpiCommunicator::all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) {
  const ObservedCall observed(observer_.get(), ObservedOp::all_reduce);
  count_opaque(observer_.get());
  for (size_t done = 0; done < count || (count == 0 && done == 0);) {
    const size_t piece = std::min(count - done, kMaxPiece);
    const void* src = in == out ? MPI_IN_PLACE : byte_offset(in, done, dtype);
    DTS_MPI_CHECK(MPI_Allreduce(src, byte_offset(out, done, dtype), static_cast<int>(piece), type_of(dtype),
                                mpi_op(dtype, op), comm_));
    done += piece;
    if (count == 0) break;
  }
  if (op == ReduceOp::avg) divide_by(dtype, out, count, size_);
}

void MpiCommunicator::reduce_scatter(const void* in, void* out, size_t out_count, DType dtype, ReduceOp op) {
  const ObservedCall observed(observer_.get(), ObservedOp::reduce_scatter);
  count_opaque(observer_.get());
  const int n = checked_count(out_count, "reduce_scatter");
  // In place per NCCL: out == in + rank * out_count; MPI wants MPI_IN_PLACE and leaves the
  // result at the start of the buffer, so move it to this rank's slot afterwards.
  const bool in_place = out == byte_offset(in, static_cast<size_t>(rank_) * out_count, dtype);
  if (in_place && out_count > 0) {
    void* buffer = const_cast<void*>(in);
    DTS_MPI_CHECK(MPI_Reduce_scatter_block(MPI_IN_PLACE, buffer, n, type_of(dtype), mpi_op(dtype, op), comm_));
    if (rank_ != 0) std::memmove(out, buffer, out_count * size_of(dtype));
  } else {
    DTS_MPI_CHECK(MPI_Reduce_scatter_block(in, out, n, type_of(dtype), mpi_op(dtype, op), comm_));
  }
  if (op == ReduceOp::avg) divide_by(dtype, out, out_count, size_);
}

void MpiCommunicator::all_gather(const void* in, void* out, size_t in_count, DType dtype) {
  const ObservedCall observed(observer_.get(), ObservedOp::all_gather);
  count_opaque(observer_.get());
  const int n = checked_count(in_count, "all_gather");
  const bool in_place = in == byte_offset(out, static_cast<size_t>(rank_) * in_count, dtype);
  DTS_MPI_CHECK(MPI_Allgather(in_place ? MPI_IN_PLACE : in, n, type_of(dtype), out, n, type_of(dtype), comm_));
}

void MpiCommunicator::broadcast(const void* in, void* out, size_t count, DType dtype, int root) {
  const MPI_Datatype type = type_of(dtype);  // first: a refused dtype is refused at 0 elements too
  const ObservedCall observed(observer_.get(), ObservedOp::broadcast);
  count_opaque(observer_.get());
  if (rank_ == root && in != out && count > 0) std::memcpy(out, in, count * size_of(dtype));
  for (size_t done = 0; done < count;) {
    const size_t piece = std::min(count - done, kMaxPiece);
    DTS_MPI_CHECK(MPI_Bcast(byte_offset(out, done, dtype), static_cast<int>(piece), type, root, comm_));
    done += piece;
  }
}

void MpiCommunicator::reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op, int root) {
  // Decided on every rank alike (only the root passes MPI_IN_PLACE, but all must skip together).
  if (in == out && root != 0 && in_place_reduce_crashes_) {
    throw Error(Error::Kind::unsupported,
                "mpi: " + mpi_library_version() +
                    " crashes in MPI_Reduce(MPI_IN_PLACE) at a non-zero root (pmodels/mpich#6540, fixed in 4.1.2); "
                    "not run");
  }
  const ObservedCall observed(observer_.get(), ObservedOp::reduce);
  count_opaque(observer_.get());
  for (size_t done = 0; done < count || (count == 0 && done == 0);) {
    const size_t piece = std::min(count - done, kMaxPiece);
    const void* src = (in == out && rank_ == root) ? MPI_IN_PLACE : byte_offset(in, done, dtype);
    // The receive buffer is significant at the root only. Elsewhere pass none: an in-place call
    // would otherwise hand MPI the send buffer twice, and MPICH 4.0 crashes on that alias.
    void* dst = rank_ == root ? byte_offset(out, done, dtype) : nullptr;
    DTS_MPI_CHECK(MPI_Reduce(src, dst, static_cast<int>(piece), type_of(dtype), mpi_op(dtype, op), root, comm_));
    done += piece;
    if (count == 0) break;
  }
  if (op == ReduceOp::avg && rank_ == root) divide_by(dtype, out, count, size_);
}

void MpiCommunicator::all_to_all(const void* in, void* out, size_t count_per_peer, DType dtype) {
  const ObservedCall observed(observer_.get(), ObservedOp::all_to_all);
  count_opaque(observer_.get());
  const int n = checked_count(count_per_peer, "all_to_all");
  DTS_MPI_CHECK(MPI_Alltoall(in == out ? MPI_IN_PLACE : in, n, type_of(dtype), out, n, type_of(dtype), comm_));
}

void MpiCommunicator::send(const void* in, size_t count, DType dtype, int peer) {
  const ObservedCall observed(observer_.get(), ObservedOp::send);
  count_sent(observer_.get(), bytes_of(count, dtype));
  DTS_MPI_CHECK(MPI_Send(in, checked_count(count, "send"), type_of(dtype), peer, 0, comm_));
}

void MpiCommunicator::recv(void* out, size_t count, DType dtype, int peer) {
  const ObservedCall observed(observer_.get(), ObservedOp::recv);
  MPI_Status status;
  DTS_MPI_CHECK(MPI_Recv(out, checked_count(count, "recv"), type_of(dtype), peer, 0, comm_, &status));
  count_status_received(observer_.get(), status, type_of(dtype), dtype);
}

void MpiCommunicator::send_recv(const void* in, int send_peer, void* out, int recv_peer, size_t count, DType dtype) {
  const ObservedCall observed(observer_.get(), ObservedOp::send_recv);
  count_sent(observer_.get(), bytes_of(count, dtype));
  const int n = checked_count(count, "send_recv");
  MPI_Status status;
  if (in == out) {
    DTS_MPI_CHECK(MPI_Sendrecv_replace(out, n, type_of(dtype), send_peer, 1, recv_peer, 1, comm_, &status));
  } else {
    DTS_MPI_CHECK(MPI_Sendrecv(in, n, type_of(dtype), send_peer, 1, out, n, type_of(dtype), recv_peer, 1, comm_,
                               &status));
  }
  count_status_received(observer_.get(), status, type_of(dtype), dtype);
}

std::unique_ptr<Work> MpiCommunicator::isend(const void* in, size_t count, DType dtype, int peer) {
  const ObservedCall observed(observer_.get(), ObservedOp::isend);
  count_sent(observer_.get(), bytes_of(count, dtype));
  MPI_Request request;
  DTS_MPI_CHECK(MPI_Isend(in, checked_count(count, "isend"), type_of(dtype), peer, 0, comm_, &request));
  return std::make_unique<MpiWork>(request, observer_.get());
}

std::unique_ptr<Work> MpiCommunicator::irecv(void* out, size_t count, DType dtype, int peer) {
  const ObservedCall observed(observer_.get(), ObservedOp::irecv);
  MPI_Request request;
  DTS_MPI_CHECK(MPI_Irecv(out, checked_count(count, "irecv"), type_of(dtype), peer, 0, comm_, &request));
  return std::make_unique<MpiWork>(request, observer_.get(), std::function<void()>{}, std::pair{type_of(dtype), dtype});
}

std::unique_ptr<Work> MpiCommunicator::all_reduce_async(const void* in, void* out, size_t count, DType dtype,
                                                        ReduceOp op) {
  MPI_Request request;
  DTS_MPI_CHECK(MPI_Iallreduce(in == out ? MPI_IN_PLACE : in, out, checked_count(count, "all_reduce_async"),
                               type_of(dtype), mpi_op(dtype, op), comm_, &request));
  const ObservedCall observed(observer_.get(), ObservedOp::all_reduce_async);
  count_opaque(observer_.get());
  std::function<void()> finish;
  if (op == ReduceOp::avg) {
    finish = [dtype, out, count, n = size_] { divide_by(dtype, out, count, n); };
  }
  return std::make_unique<MpiWork>(request, observer_.get(), std::move(finish));
}

void MpiCommunicator::barrier() {
  const ObservedCall observed(observer_.get(), ObservedOp::barrier);
  DTS_MPI_CHECK(MPI_Barrier(comm_));
}

MPI_Datatype MpiCommunicator::type_of(DType dtype) const {
  const MPI_Datatype chosen = chosen_[static_cast<size_t>(dtype)];
  return chosen != MPI_DATATYPE_NULL ? chosen : mpi_type(dtype);
}

void MpiCommunicator::use_datatype_name(DType dtype, std::string_view name) {
  MPI_Datatype& chosen = chosen_[static_cast<size_t>(dtype)];
  if (name.empty()) {
    chosen = MPI_DATATYPE_NULL;
    return;
  }
  for (const NamedType& t : named_types()) {
    if (t.dtype != dtype || name != t.name) continue;
    // The platform's C type and the library must agree on the width, or the name is not this dtype's.
    int bytes = 0;
    DTS_MPI_CHECK(MPI_Type_size(t.type, &bytes));
    if (static_cast<size_t>(bytes) != size_of(dtype)) {
      throw Error(Error::Kind::unsupported, "mpi: " + std::string(name) + " is " + std::to_string(bytes) +
                                                " bytes in this library, not " + std::string(dts::name(dtype)) + "'s " +
                                                std::to_string(size_of(dtype)));
    }
    chosen = t.type;
    return;
  }
  throw Error(Error::Kind::invalid_argument,
              "mpi: " + std::string(name) + " is not an MPI name of " + std::string(dts::name(dtype)));
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) {
  MPI_Comm sub;
  DTS_MPI_CHECK(MPI_Comm_split(comm_, color, key, &sub));
  return std::make_unique<MpiCommunicator>(sub, spec_, observer_);
}

namespace {
std::unique_ptr<Communicator> make_mpi(const BackendSpec& spec, const CommOptions& options) {
  if (!spec.args.empty()) throw Error(Error::Kind::invalid_argument, "backend mpi takes no arguments");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) throw Error(Error::Kind::invalid_argument, "backend mpi needs MPI_Init first");
  MPI_Comm comm;
  DTS_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  return std::make_unique<MpiCommunicator>(comm, "mpi", options.observer);
}
}  // namespace

DTS_REGISTER_BACKEND("mpi", "mpi", "the MPI library's own collectives, host memory", make_mpi);

std::vector<std::string> mpi_datatype_names(DType dtype, bool reducing) {
  std::vector<std::string> names;
  for (const NamedType& t : named_types()) {
    if (t.dtype == dtype && (t.reducible || !reducing)) names.emplace_back(t.name);
  }
  return names;
}

}  // namespace dts

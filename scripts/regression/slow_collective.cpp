// A library regression on demand, for measuring the regression gate (gate_trials.sh): preloaded
// into dtsuite (LD_PRELOAD), it makes one MPI collective slower by a factor at message sizes
// from a threshold, through MPI's profiling interface, while everything that identifies the
// stack (backend, library and versions, ranks, nodes) stays as it is, so `dtsuite compare`
// accepts the runs and must find the slowdown from the numbers alone.
//   DTS_SLOW_COLLECTIVE=NAME:FACTOR:MIN_BYTES   e.g. MPI_Allgather:1.25:65536
// NAME is MPI_Allreduce, MPI_Allgather or MPI_Reduce_scatter_block; a call whose full buffer
// (nccl-tests' size: the all_reduce's buffer, all_gather's output, reduce_scatter's input) has at
// least MIN_BYTES takes FACTOR times its own time: after the real call, the rank spins for
// (FACTOR - 1) times what the call took on it. Unset: every call passes through untouched.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

struct Slowdown {
  std::string name;
  double factor = 1;
  long long min_bytes = 0;
};

Slowdown parse() {
  Slowdown s;
  const char* text = std::getenv("DTS_SLOW_COLLECTIVE");
  if (!text || !*text) return s;
  char name[64] = {};
  if (std::sscanf(text, "%63[^:]:%lf:%lld", name, &s.factor, &s.min_bytes) != 3 || !(s.factor >= 1) || s.min_bytes < 0) {
    std::fprintf(stderr, "slow_collective: DTS_SLOW_COLLECTIVE='%s' is not NAME:FACTOR:MIN_BYTES (FACTOR >= 1)\n", text);
    std::abort();
  }
  s.name = name;
  return s;
}

const Slowdown& slowdown() {
  static const Slowdown s = parse();
  return s;
}

long long bytes_of(long long count, MPI_Datatype type) {
  int size = 0;
  PMPI_Type_size(type, &size);
  return count * size;
}

// Whether calls to `name` are slowed, and at `bytes`. Asked before the call, the name first, and
// the clock read only for calls that are: a call of another collective passes straight through
// at the cost of a compare (a 0-byte call takes 40 ns here, and reading the clock around every
// call made the others' 0-byte rows 75% slower: flagged, though not the collective slowed).
bool targets(const char* name) {
  static const std::string target = slowdown().factor > 1 ? slowdown().name : "";
  return std::strcmp(target.c_str(), name) == 0;
}
bool slowed(long long bytes) { return bytes >= slowdown().min_bytes; }

// Spins (a sleep's wake-up is coarser than the microseconds small calls take) until the call has
// taken `factor` times what it took.
void stretch(std::chrono::steady_clock::time_point start) {
  const auto now = std::chrono::steady_clock::now();
  const auto until =
      now + std::chrono::duration_cast<std::chrono::steady_clock::duration>((now - start) * (slowdown().factor - 1));
  while (std::chrono::steady_clock::now() < until) {
  }
}

int size_of(MPI_Comm comm) {
  int n = 1;
  PMPI_Comm_size(comm, &n);
  return n;
}

}  // namespace

extern "C" {

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  if (!targets("MPI_Allreduce") || !slowed(bytes_of(count, datatype))) {
    return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  }
  const auto start = std::chrono::steady_clock::now();
  const int rc = PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  stretch(start);
  return rc;
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
  if (!targets("MPI_Allgather") || !slowed(bytes_of(recvcount, recvtype) * size_of(comm))) {
    return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  }
  const auto start = std::chrono::steady_clock::now();
  const int rc = PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  stretch(start);
  return rc;
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm) {
  if (!targets("MPI_Reduce_scatter_block") || !slowed(bytes_of(recvcount, datatype) * size_of(comm))) {
    return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
  }
  const auto start = std::chrono::steady_clock::now();
  const int rc = PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
  stretch(start);
  return rc;
}

}  // extern "C"

// The `mpi` backend: every collective through the MPI library in host memory (CUDA-aware MPI
// could take device pointers; this backend reports Memory::host and stays there).
#pragma once
#include <mpi.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace dts {

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm` (freed in the destructor). MPI must be initialized.
  explicit MpiCommunicator(MPI_Comm comm, std::string spec = "mpi", std::shared_ptr<OpObserver> observer = {});
  ~MpiCommunicator() override;

  std::string_view backend() const override { return spec_; }
  std::string version() const override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Memory memory() const override { return Memory::host; }

  void all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* in, void* out, size_t out_count, DType dtype, ReduceOp op) override;
  void all_gather(const void* in, void* out, size_t in_count, DType dtype) override;
  void broadcast(const void* in, void* out, size_t count, DType dtype, int root) override;
  void reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op, int root) override;
  void all_to_all(const void* in, void* out, size_t count_per_peer, DType dtype) override;
  void send(const void* in, size_t count, DType dtype, int peer) override;
  void recv(void* out, size_t count, DType dtype, int peer) override;
  void send_recv(const void* in, int send_peer, void* out, int recv_peer, size_t count, DType dtype) override;
  std::unique_ptr<Work> isend(const void* in, size_t count, DType dtype, int peer) override;
  std::unique_ptr<Work> irecv(void* out, size_t count, DType dtype, int peer) override;
  std::unique_ptr<Work> all_reduce_async(const void* in, void* out, size_t count, DType dtype,
                                         ReduceOp op) override;
  void barrier() override;
  std::unique_ptr<Communicator> split(int color, int key) override;

  MPI_Comm native() const { return comm_; }
  // Calls of `dtype` go through the MPI datatype `name` (one of mpi_datatype_names) until the next
  // call; "" restores the fixed-width name.
  void use_datatype_name(DType dtype, std::string_view name) override;
  // The MPI datatype calls of `dtype` go through now.
  MPI_Datatype type_of(DType dtype) const;

 private:
  MPI_Comm comm_;
  std::string spec_;
  std::shared_ptr<OpObserver> observer_;
  bool in_place_reduce_crashes_;
  // By DType: the datatype use_datatype_name chose; MPI_DATATYPE_NULL (set in the constructor: it
  // is no null pointer in every library) for the fixed-width default.
  std::array<MPI_Datatype, static_cast<size_t>(DType::f8e5m2) + 1> chosen_;
  int rank_ = 0;
  int size_ = 1;
};

// Every MPI name of `dtype` on this platform, the fixed-width one (the default) first; with
// `reducing`, only the names the standard defines reductions on (MPI_CHAR is left out). Empty for
// the float dtypes, which have one name (or none: fp8).
std::vector<std::string> mpi_datatype_names(DType dtype, bool reducing);

// The MPI library's own version string, first line ("Open MPI v4.1.4, ...", "MPICH Version: 4.0.2").
std::string mpi_library_version();

// The MPI library's settings that choose what runs, from `environment` ("KEY=VALUE" entries, as
// environ holds them), sorted, `key=value;...`, empty when none is set:
// - Open MPI's component selections, as `mpirun --mca KEY VALUE` or OMPI_MCA_KEY set them: the
//   frameworks pml, mtl, btl, coll, op and osc (`--mca op ^avx`: op=^avx), and the tuned
//   collectives' forced algorithms (coll_tuned_*);
// - MPICH's control variables, MPIR_CVAR_* (the MPIR_CVAR_ prefix dropped).
// Open MPI reads MCA parameter files too ($HOME/.openmpi/mca-params.conf); those are not seen.
std::string mpi_settings(const std::vector<std::string>& environment);
// mpi_settings of this process's environment.
std::string mpi_settings();

// True for MPICH releases that crash in MPI_Reduce(MPI_IN_PLACE) at a non-zero root
// (pmodels/mpich#6540, fixed in 4.1.2), judged from the library version string.
bool mpich_in_place_reduce_crashes(const std::string& version);

}  // namespace dts

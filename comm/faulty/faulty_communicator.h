// The `faulty(KIND,INNER)` backend: wraps any communicator and injects one kind of fault on one
// rank, so that dtsuite can prove its own checks catch a broken stack (see faulty_communicator.cpp
// for what each kind models). Built by make_communicator("faulty(bitflip,mpi)") or directly.
#pragma once
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"

namespace dts {

enum class FaultKind : uint8_t { bitflip, drop, stale, hang, delay };

struct FaultSpec {
  FaultKind kind = FaultKind::bitflip;
  // How long the victim sleeps before each collective (delay only): "delay" or "delay(MS)".
  std::chrono::milliseconds delay{50};
};

// "bitflip", "drop", "stale", "hang", "delay", "delay(20)"; anything else: Error{invalid_argument}
// listing the kinds.
FaultSpec parse_fault_spec(std::string_view text);
// The spelling parse_fault_spec accepts ("delay(20)" for a 20 ms delay).
std::string to_string(const FaultSpec& fault);

class FaultyCommunicator final : public Communicator {
 public:
  // The victim is options.fault_rank, or the last rank when it is -1. A fault_rank outside
  // [0, size) is an Error{invalid_argument}, unless `allow_no_victim` (the groups made by split(),
  // where a world's fault rank may lie outside a small group: such a group has no victim).
  FaultyCommunicator(FaultSpec fault, std::unique_ptr<Communicator> inner, const CommOptions& options,
                     bool allow_no_victim = false);
  ~FaultyCommunicator() override;

  std::string_view backend() const override { return spec_; }
  std::string version() const override { return inner_->version(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Memory memory() const override { return inner_->memory(); }

  void all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* in, void* out, size_t out_count, DType dtype, ReduceOp op) override;
  void all_gather(const void* in, void* out, size_t in_count, DType dtype) override;
  void broadcast(const void* in, void* out, size_t count, DType dtype, int root) override;
  void reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op, int root) override;
  void all_to_all(const void* in, void* out, size_t count_per_peer, DType dtype) override;
  void send_recv(const void* in, int send_peer, void* out, int recv_peer, size_t count, DType dtype) override;
  std::unique_ptr<Work> all_reduce_async(const void* in, void* out, size_t count, DType dtype,
                                         ReduceOp op) override;

  // Point to point and barrier pass through untouched: the faults target the collectives.
  void send(const void* in, size_t count, DType dtype, int peer) override { inner_->send(in, count, dtype, peer); }
  void recv(void* out, size_t count, DType dtype, int peer) override { inner_->recv(out, count, dtype, peer); }
  std::unique_ptr<Work> isend(const void* in, size_t count, DType dtype, int peer) override {
    return inner_->isend(in, count, dtype, peer);
  }
  std::unique_ptr<Work> irecv(void* out, size_t count, DType dtype, int peer) override {
    return inner_->irecv(out, count, dtype, peer);
  }
  void barrier() override { inner_->barrier(); }
  // Splits the inner communicator and wraps each group with the same fault.
  std::unique_ptr<Communicator> split(int color, int key) override;

  const FaultSpec& fault() const { return fault_; }
  // The rank the fault targets, or -1 when this group has none. (bitflip and stale on reduce hit
  // the root instead, since only the root's output is defined.)
  int victim() const { return victim_; }

  // For tests and the harness's watchdog: every `hang` victim blocked now continues (into the
  // inner collective). Each hang waits for a release that comes after it began.
  static void release_hangs();
  // How many calls are blocked in a hang right now (in this process), so a test can wait until
  // the victim is really stuck before it checks that the call has not returned.
  static int hanging_calls();

  // The collectives, in the order of the stale kind's per-op memory.
  enum class Op : uint8_t { all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all, send_recv,
                            all_reduce_async };
  static constexpr size_t kOpCount = 8;
  // The victim's last true output of each op (stale). Shared with async Work handles, which
  // update it when they complete.
  using StaleMemory = std::array<std::optional<std::vector<std::byte>>, kOpCount>;

 private:
  // The fault starts after options.fault_after_calls collectives (counted on every rank).
  bool armed() const { return calls_ > options_.fault_after_calls; }
  bool is_victim() const { return victim_ >= 0 && rank() == victim_ && armed(); }
  // hang and delay, on the victim, before the collective.
  void before_collective() const;
  // bitflip and stale, on `corrupt_rank`, after the collective wrote `out_count` elements.
  void after_collective(Op op, void* out, size_t out_count, DType dtype, int corrupt_rank);
  // Kinds that read or write the user's buffers need host memory.
  void require_host(std::string_view op) const;

  FaultSpec fault_;
  std::unique_ptr<Communicator> inner_;
  CommOptions options_;
  std::string spec_;
  int victim_ = -1;
  mutable int64_t calls_ = 0;
  std::shared_ptr<StaleMemory> stale_;
};

}  // namespace dts

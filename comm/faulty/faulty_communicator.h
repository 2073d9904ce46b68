// The `faulty(KIND,INNER)` backend: wraps any communicator and injects one kind of fault on one
// process, so that dtsuite can prove its own checks catch a broken stack (see faulty_communicator.cpp
// for what each kind models). Built by make_communicator("faulty(bitflip,mpi)") or directly.
// fault_rank is a rank of the communicator faulty(...) was made on; in every group split from it,
// the same process is the victim, and a group without it has none.
#pragma once
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "comm/forwarding_communicator.h"

namespace dts {

enum class FaultKind : uint8_t { bitflip, drop, stale, hang, delay, error, saturate, dropnan, abort, crash };

struct FaultSpec {
  FaultKind kind = FaultKind::bitflip;
  // How long the victim sleeps before each operation it faults (delay only): "delay" or "delay(MS)".
  std::chrono::milliseconds delay{50};
  // error(all): every rank throws, not only the victim.
  bool every_rank = false;
};

// "bitflip", "drop", "stale", "hang", "delay", "delay(20)", "error", "error(all)", "saturate",
// "dropnan", "abort", "crash"; anything else: Error{invalid_argument} listing the kinds.
FaultSpec parse_fault_spec(std::string_view text);
// The spelling parse_fault_spec accepts ("delay(20)" for a 20 ms delay).
std::string to_string(const FaultSpec& fault);

class FaultyCommunicator final : public ForwardingCommunicator {
 public:
  // fault_rank is a rank of the communicator faulty(...) was made on (`inner`): that process is
  // the victim, the last rank when it is -1; outside [0, size) it is an Error{invalid_argument}.
  // In every group split from it, the same process is the victim, and a group without it has none.
  // A kind that touches the data (bitflip, drop, stale) over an inner backend whose buffers live
  // in device memory is an Error{invalid_argument} too: it could not inject anything there.
  FaultyCommunicator(FaultSpec fault, std::unique_ptr<Communicator> inner, const CommOptions& options);
  ~FaultyCommunicator() override;

  void all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* in, void* out, size_t out_count, DType dtype, ReduceOp op) override;
  void all_gather(const void* in, void* out, size_t in_count, DType dtype) override;
  void broadcast(const void* in, void* out, size_t count, DType dtype, int root) override;
  void reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op, int root) override;
  void all_to_all(const void* in, void* out, size_t count_per_peer, DType dtype) override;
  void send_recv(const void* in, int send_peer, void* out, int recv_peer, size_t count, DType dtype) override;
  std::unique_ptr<Work> all_reduce_async(const void* in, void* out, size_t count, DType dtype,
                                         ReduceOp op) override;

  // Point to point, faulted on the victim as faulty_communicator.cpp describes. barrier is
  // forwarded untouched (refused only once aborted): it carries no data, and a hang there would
  // hide which op hung.
  void send(const void* in, size_t count, DType dtype, int peer) override;
  void recv(void* out, size_t count, DType dtype, int peer) override;
  std::unique_ptr<Work> isend(const void* in, size_t count, DType dtype, int peer) override;
  std::unique_ptr<Work> irecv(void* out, size_t count, DType dtype, int peer) override;

  // abort: once the victim's communicator is aborted, these throw too, as every call does.
  void barrier() override;
  void synchronize() override;
  std::unique_ptr<Communicator> split(int color, int key) override;
  bool aborted() const override { return aborted_ || inner_->aborted(); }
  void abort() override;

  const FaultSpec& fault() const { return fault_; }
  // The victim process's rank in this communicator, or -1 when this group (made by split()) does
  // not contain it. (bitflip and stale on reduce hit the root instead, since only the root's
  // output is defined; a group without the victim has no fault at all.)
  int victim() const { return victim_; }

  // For tests and the harness's watchdog: every `hang` victim blocked now continues (into the
  // inner operation). Each hang waits for a release that comes after it began.
  static void release_hangs();
  // How many calls are blocked in a hang right now (in this process), so a test can wait until
  // the victim is really stuck before it checks that the call has not returned.
  static int hanging_calls();
  // For tests: abort strikes once per process (the communicator made to replace the aborted one
  // runs clean); this lets the next armed call of a faulty(abort,...) strike again.
  static void rearm_abort();

  // The operations whose output stale replaces; `receive` is every point-to-point receive (recv
  // and irecv, from any peer).
  enum class Op : uint8_t { all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all, send_recv,
                            all_reduce_async, receive };
  static constexpr size_t kCollectiveOpCount = 8;  // the ops before `receive`
  // The victim's last true outputs (stale). A collective remembers its last call only (a call of
  // another size is not corrupted, and replaces it); receives remember the last of each byte size,
  // so a ring that alternates two segment sizes still receives stale data. Shared with async Work
  // handles, which update it when they complete.
  struct StaleMemory {
    std::array<std::optional<std::vector<std::byte>>, kCollectiveOpCount> collectives;
    std::map<size_t, std::optional<std::vector<std::byte>>> receives;
  };

 private:
  // What a group made by split() inherits: whether this process is the victim (a rank of the
  // parent means nothing in the group).
  struct SplitGroup {
    bool this_process_is_victim;
  };
  // The group's victim rank is found with one all_reduce over `inner_group` (collective, as the
  // split that made it is), on INNER, so the wrapper's own fault never touches it.
  FaultyCommunicator(FaultSpec fault, std::unique_ptr<Communicator> inner_group, const CommOptions& options,
                     SplitGroup group);

  std::unique_ptr<Communicator> wrap(std::unique_ptr<Communicator> inner_group) override;
  // bitflip, drop and stale need host memory: refused when the communicator is made.
  void require_injectable() const;

  bool on_victim() const { return fault_.every_rank || (victim_ >= 0 && rank() == victim_); }
  // The collectives' fault starts after options.fault_after_calls collectives (counted on every
  // rank), and strikes the fraction options.fault_rate of the calls after them.
  bool armed() const { return calls_ > options_.fault_after_calls && picked(calls_); }
  // Whether call number `call` is among options.fault_rate of the calls (always, at rate 1).
  bool picked(int64_t call) const;
  bool is_victim() const { return on_victim() && armed(); }
  // hang and delay, on the victim, before the collective.
  void before_collective();
  // abort, on every rank of a group with the victim, at the first armed collective of the process.
  void abort_if_armed();
  // Every call of an aborted communicator throws first, as nccl's does.
  void throw_if_aborted() const;
  // The point-to-point calls' own count and the same hang and delay; true when this call is the
  // armed victim's (see "Arming" in faulty_communicator.cpp).
  bool before_point_to_point(std::string_view op);
  // hang or delay, now (the caller decided that this call is faulted).
  void stall() const;
  // What bitflip or stale do to `out_count` elements at `out` once an operation has written them
  // on `corrupt_rank` (null when nothing): run at once after a blocking call, or by the Work of
  // an asynchronous one when it completes.
  std::function<void()> output_fault(Op op, void* out, size_t out_count, DType dtype, int corrupt_rank,
                                     bool armed) const;
  // saturate and dropnan (armed, over a dtype with host arithmetic): every rank gathers every
  // rank's `in_count` input elements through INNER, before an in-place call overwrites them.
  // Empty when the fault does not apply; the same on every rank.
  std::vector<std::byte> gather_inputs(const void* in, size_t in_count, DType dtype);
  // On `corrupt_rank`, `out` becomes the reduction of the gathered inputs with the fault's
  // arithmetic: out[i] combines, in rank order, element `offset + i` of every rank's input.
  void misreduce(const std::vector<std::byte>& gathered, void* out, size_t out_count, size_t offset, DType dtype,
                 ReduceOp op, int corrupt_rank) const;
  void after_collective(Op op, void* out, size_t out_count, DType dtype, int corrupt_rank);
  // Kinds that read or write the user's buffers need host memory.
  void require_host(std::string_view op) const;

  FaultSpec fault_;
  CommOptions options_;
  int victim_ = -1;  // in this communicator's ranks
  int64_t calls_ = 0;
  bool aborted_ = false;
  int64_t point_to_point_calls_ = 0;
  std::shared_ptr<StaleMemory> stale_;
};

}  // namespace dts

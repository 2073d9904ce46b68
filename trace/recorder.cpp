// The trace recorder (trace/recorder.h).
#include "trace/recorder.h"

#include <chrono>
#include <mutex>
#include <utility>

#include "comm/forwarding_communicator.h"
#include "trace/trace.h"

namespace dts::trace {

class Recording {
 public:
  Recording(const std::string& dir, int rank, int world, const std::string& backend) : writer_(dir, rank) {
    Header header;
    header.rank = rank;
    header.world = world;
    header.source = "dtsuite record";
    header.backend = backend;
    writer_.header(header);
  }
  int add_group(const std::vector<int>& ranks) {
    std::lock_guard lock(mutex_);
    Group g;
    g.id = next_group_++;
    g.ranks = ranks;
    writer_.group(g);
    return g.id;
  }
  // Numbers `op` and writes it; returns its seq.
  int64_t write(Op& op) {
    std::lock_guard lock(mutex_);
    op.seq = next_seq_++;
    writer_.op(op);
    return op.seq;
  }
  void close() {
    std::lock_guard lock(mutex_);
    writer_.close();
  }

 private:
  std::mutex mutex_;  // a strategy may wait for its async work on another thread
  TraceWriter writer_;
  int64_t next_seq_ = 0;
  int next_group_ = 0;
};

std::shared_ptr<Recording> start_recording(const std::string& dir, int rank, int world, const std::string& backend) {
  return std::make_shared<Recording>(dir, rank, world, backend);
}

void finish_recording(Recording& recording) { recording.close(); }

namespace {

using Clock = std::chrono::steady_clock;

// An async call's handle: the wait line is written when it is first seen complete.
class TracedWork final : public Work {
 public:
  TracedWork(std::unique_ptr<Work> inner, std::shared_ptr<Recording> recording, int group, int64_t seq)
      : inner_(std::move(inner)), recording_(std::move(recording)), group_(group), seq_(seq) {}
  bool test() override {
    const bool done = inner_->test();
    if (done) completed(-1);  // when it completed is not known
    return done;
  }
  void wait(std::chrono::duration<double> timeout) override {
    const auto start = Clock::now();
    inner_->wait(timeout);
    completed(std::chrono::duration<double>(Clock::now() - start).count());
  }

 private:
  void completed(double seconds) {
    if (waited_) return;
    waited_ = true;
    Op op;
    op.kind = OpKind::wait;
    op.group = group_;
    op.waits = {seq_};
    op.seconds = seconds;
    recording_->write(op);
  }
  std::unique_ptr<Work> inner_;
  std::shared_ptr<Recording> recording_;
  int group_;
  int64_t seq_;
  bool waited_ = false;
};

class RecordingCommunicator final : public ForwardingCommunicator {
 public:
  RecordingCommunicator(std::unique_ptr<Communicator> inner, std::shared_ptr<Recording> recording,
                        std::vector<int> global_ranks)
      : ForwardingCommunicator(std::move(inner), "record"), recording_(std::move(recording)),
        global_ranks_(std::move(global_ranks)), timed_(inner_->memory() == Memory::host) {
    group_ = recording_->add_group(global_ranks_);
  }
  // The stack is the one recorded: rows and the trace's header name it, not the recorder.
  std::string_view backend() const override { return inner_->backend(); }

  void all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) override {
    run(make(OpKind::all_reduce, count, dtype, op), [&] { inner_->all_reduce(in, out, count, dtype, op); });
  }
  void reduce_scatter(const void* in, void* out, size_t out_count, DType dtype, ReduceOp op) override {
    run(make(OpKind::reduce_scatter, out_count, dtype, op),
        [&] { inner_->reduce_scatter(in, out, out_count, dtype, op); });
  }
  void all_gather(const void* in, void* out, size_t in_count, DType dtype) override {
    run(make(OpKind::all_gather, in_count, dtype), [&] { inner_->all_gather(in, out, in_count, dtype); });
  }
  void broadcast(const void* in, void* out, size_t count, DType dtype, int root) override {
    Op op = make(OpKind::broadcast, count, dtype);
    op.root = root;
    run(std::move(op), [&] { inner_->broadcast(in, out, count, dtype, root); });
  }
  void reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp redop, int root) override {
    Op op = make(OpKind::reduce, count, dtype, redop);
    op.root = root;
    run(std::move(op), [&] { inner_->reduce(in, out, count, dtype, redop, root); });
  }
  void all_to_all(const void* in, void* out, size_t count_per_peer, DType dtype) override {
    run(make(OpKind::all_to_all, count_per_peer, dtype), [&] { inner_->all_to_all(in, out, count_per_peer, dtype); });
  }
  void send(const void* in, size_t count, DType dtype, int peer) override {
    Op op = make(OpKind::send, count, dtype);
    op.peer = peer;
    run(std::move(op), [&] { inner_->send(in, count, dtype, peer); });
  }
  void recv(void* out, size_t count, DType dtype, int peer) override {
    Op op = make(OpKind::recv, count, dtype);
    op.peer = peer;
    run(std::move(op), [&] { inner_->recv(out, count, dtype, peer); });
  }
  void send_recv(const void* in, int send_peer, void* out, int recv_peer, size_t count, DType dtype) override {
    Op op = make(OpKind::send_recv, count, dtype);
    op.peer = send_peer;
    op.source = recv_peer;
    run(std::move(op), [&] { inner_->send_recv(in, send_peer, out, recv_peer, count, dtype); });
  }
  std::unique_ptr<Work> isend(const void* in, size_t count, DType dtype, int peer) override {
    Op op = make(OpKind::send, count, dtype);
    op.peer = peer;
    return issue(std::move(op), inner_->isend(in, count, dtype, peer));
  }
  std::unique_ptr<Work> irecv(void* out, size_t count, DType dtype, int peer) override {
    Op op = make(OpKind::recv, count, dtype);
    op.peer = peer;
    return issue(std::move(op), inner_->irecv(out, count, dtype, peer));
  }
  std::unique_ptr<Work> all_reduce_async(const void* in, void* out, size_t count, DType dtype,
                                         ReduceOp redop) override {
    return issue(make(OpKind::all_reduce, count, dtype, redop), inner_->all_reduce_async(in, out, count, dtype, redop));
  }
  void barrier() override {
    run(make(OpKind::barrier, 0, DType::u8), [&] { inner_->barrier(); });
  }
  // The group's members by their global ranks, learned from the group itself (over INNER, so
  // the exchange is not part of the trace), then written as the group's line.
  std::unique_ptr<Communicator> split(int color, int key) override {
    auto group = inner_->split(color, key);
    if (!group) return nullptr;
    const int32_t me = global_ranks_[static_cast<size_t>(inner_->rank())];
    std::vector<int32_t> members(static_cast<size_t>(group->size()));
    group->all_gather(&me, members.data(), 1, DType::i32);
    return std::make_unique<RecordingCommunicator>(std::move(group), recording_,
                                                   std::vector<int>(members.begin(), members.end()));
  }

 protected:
  std::unique_ptr<Communicator> wrap(std::unique_ptr<Communicator>) override {
    throw Error(Error::Kind::invalid_argument, "record: groups are made by split()");  // split() is overridden
  }

 private:
  Op make(OpKind kind, size_t count, DType dtype, std::optional<ReduceOp> redop = std::nullopt) const {
    Op op;
    op.kind = kind;
    op.group = group_;
    op.count = static_cast<int64_t>(count);
    op.dtype = dtype;
    op.redop = redop;
    return op;
  }
  template <class Call>
  void run(Op op, Call&& call) {
    const auto start = Clock::now();
    call();
    if (timed_) op.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    recording_->write(op);
  }
  std::unique_ptr<Work> issue(Op op, std::unique_ptr<Work> work) {
    op.async = true;
    const int64_t seq = recording_->write(op);
    return std::make_unique<TracedWork>(std::move(work), recording_, group_, seq);
  }

  std::shared_ptr<Recording> recording_;
  std::vector<int> global_ranks_;
  bool timed_;
  int group_ = 0;
};

}  // namespace

std::unique_ptr<Communicator> record_calls(std::unique_ptr<Communicator> world, std::shared_ptr<Recording> recording) {
  std::vector<int> ranks(static_cast<size_t>(world->size()));
  for (size_t i = 0; i < ranks.size(); ++i) ranks[i] = static_cast<int>(i);
  return std::make_unique<RecordingCommunicator>(std::move(world), std::move(recording), std::move(ranks));
}

}  // namespace dts::trace

// staged(INNER): device memory carried through INNER's host memory (staged_communicator.h).
#include "comm/staged/staged_communicator.h"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace dts {

namespace {
size_t bytes_of(size_t count, DType dtype) { return count * size_of(dtype); }

std::unique_ptr<Communicator> require_host_inner(std::unique_ptr<Communicator> inner) {
  if (inner && inner->memory() != Memory::host) {
    throw Error(Error::Kind::invalid_argument, "backend staged(INNER) carries device memory through a host backend; " +
                                                   std::string(inner->backend()) + " takes device memory itself");
  }
  return inner;
}

// A call in flight owns its staging: the host range lives until the Work completes.
class StagedWork final : public Work {
 public:
  StagedWork(std::unique_ptr<Buffer> host, std::unique_ptr<StagedCommunicator::Stage> stage)
      : host_(std::move(host)), stage_(std::move(stage)) {}
  void start(std::unique_ptr<Work> work) { work_ = std::move(work); }
  bool test() override {
    if (!work_->test()) return false;
    finish();
    return true;
  }
  void wait(std::chrono::duration<double> timeout) override {
    work_->wait(timeout);
    finish();
  }

 private:
  void finish() {
    if (stage_) stage_->finish();
    stage_.reset();
  }
  std::unique_ptr<Buffer> host_;
  std::unique_ptr<StagedCommunicator::Stage> stage_;
  std::unique_ptr<Work> work_;
};
}  // namespace

StagedCommunicator::Stage::Stage(Buffer& host, const void* in, size_t in_bytes, void* out, size_t out_bytes)
    : device_out_(out), out_bytes_(out_bytes) {
  const auto* device_in = static_cast<const char*>(in);
  auto* device_out = static_cast<char*>(out);
  const auto at = [](const char* p) { return reinterpret_cast<uintptr_t>(p); };
  const bool overlap = in && out && at(device_in) < at(device_out) + std::max<size_t>(out_bytes, 1) &&
                       at(device_out) < at(device_in) + std::max<size_t>(in_bytes, 1);
  if (overlap) {
    const char* low = std::min(device_in, static_cast<const char*>(device_out));
    const char* high = std::max(device_in + in_bytes, static_cast<const char*>(device_out) + out_bytes);
    const auto span = static_cast<size_t>(high - low);
    if (host.bytes() < span) host = Buffer(Memory::host, span);
    char* base = static_cast<char*>(host.data());
    copy_device_to_host(base, low, span);
    in_ = base + (device_in - low);
    out_ = base + (device_out - low);
    return;
  }
  const size_t in_span = in ? in_bytes : 0, out_span = out ? out_bytes : 0;
  if (host.bytes() < in_span + out_span) host = Buffer(Memory::host, in_span + out_span);
  char* base = static_cast<char*>(host.data());
  if (in) {
    copy_device_to_host(base, device_in, in_bytes);
    in_ = base;
  }
  if (out) {
    copy_device_to_host(base + in_span, device_out, out_bytes);  // what INNER leaves alone stays
    out_ = base + in_span;
  }
}

void StagedCommunicator::Stage::finish() {
  if (device_out_ && out_bytes_ > 0) copy_host_to_device(device_out_, out_, out_bytes_);
}

StagedCommunicator::StagedCommunicator(std::unique_ptr<Communicator> inner)
    : ForwardingCommunicator(require_host_inner(std::move(inner)), "staged") {}

std::string StagedCommunicator::version() const { return inner_->version() + ", staged through host memory"; }

void StagedCommunicator::all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) {
  Stage s(host_, in, bytes_of(count, dtype), out, bytes_of(count, dtype));
  inner_->all_reduce(s.in(), s.out(), count, dtype, op);
  s.finish();
}

void StagedCommunicator::reduce_scatter(const void* in, void* out, size_t out_count, DType dtype, ReduceOp op) {
  const auto n = static_cast<size_t>(size());
  Stage s(host_, in, bytes_of(out_count, dtype) * n, out, bytes_of(out_count, dtype));
  inner_->reduce_scatter(s.in(), s.out(), out_count, dtype, op);
  s.finish();
}

void StagedCommunicator::all_gather(const void* in, void* out, size_t in_count, DType dtype) {
  const auto n = static_cast<size_t>(size());
  Stage s(host_, in, bytes_of(in_count, dtype), out, bytes_of(in_count, dtype) * n);
  inner_->all_gather(s.in(), s.out(), in_count, dtype);
  s.finish();
}

void StagedCommunicator::broadcast(const void* in, void* out, size_t count, DType dtype, int root) {
  // `in` is read on the root only: another rank's may be anything, so it is not copied.
  Stage s(host_, rank() == root ? in : nullptr, bytes_of(count, dtype), out, bytes_of(count, dtype));
  inner_->broadcast(rank() == root ? s.in() : s.out(), s.out(), count, dtype, root);
  s.finish();
}

void StagedCommunicator::reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op, int root) {
  Stage s(host_, in, bytes_of(count, dtype), out, bytes_of(count, dtype));
  inner_->reduce(s.in(), s.out(), count, dtype, op, root);
  s.finish();
}

void StagedCommunicator::all_to_all(const void* in, void* out, size_t count_per_peer, DType dtype) {
  const size_t total = bytes_of(count_per_peer, dtype) * static_cast<size_t>(size());
  Stage s(host_, in, total, out, total);
  inner_->all_to_all(s.in(), s.out(), count_per_peer, dtype);
  s.finish();
}

void StagedCommunicator::send(const void* in, size_t count, DType dtype, int peer) {
  Stage s(host_, in, bytes_of(count, dtype), nullptr, 0);
  inner_->send(s.in(), count, dtype, peer);
}

void StagedCommunicator::recv(void* out, size_t count, DType dtype, int peer) {
  Stage s(host_, nullptr, 0, out, bytes_of(count, dtype));
  inner_->recv(s.out(), count, dtype, peer);
  s.finish();
}

void StagedCommunicator::send_recv(const void* in, int send_peer, void* out, int recv_peer, size_t count,
                                   DType dtype) {
  Stage s(host_, in, bytes_of(count, dtype), out, bytes_of(count, dtype));
  inner_->send_recv(s.in(), send_peer, s.out(), recv_peer, count, dtype);
  s.finish();
}

std::unique_ptr<Work> StagedCommunicator::isend(const void* in, size_t count, DType dtype, int peer) {
  auto host = std::make_unique<Buffer>();
  auto stage = std::make_unique<Stage>(*host, in, bytes_of(count, dtype), nullptr, 0);
  const void* staged_in = stage->in();
  auto work = std::make_unique<StagedWork>(std::move(host), std::move(stage));
  work->start(inner_->isend(staged_in, count, dtype, peer));
  return work;
}

std::unique_ptr<Work> StagedCommunicator::irecv(void* out, size_t count, DType dtype, int peer) {
  auto host = std::make_unique<Buffer>();
  auto stage = std::make_unique<Stage>(*host, nullptr, 0, out, bytes_of(count, dtype));
  void* staged_out = stage->out();
  auto work = std::make_unique<StagedWork>(std::move(host), std::move(stage));
  work->start(inner_->irecv(staged_out, count, dtype, peer));
  return work;
}

std::unique_ptr<Work> StagedCommunicator::all_reduce_async(const void* in, void* out, size_t count, DType dtype,
                                                           ReduceOp op) {
  auto host = std::make_unique<Buffer>();
  auto stage = std::make_unique<Stage>(*host, in, bytes_of(count, dtype), out, bytes_of(count, dtype));
  const void* staged_in = stage->in();
  void* staged_out = stage->out();
  auto work = std::make_unique<StagedWork>(std::move(host), std::move(stage));
  work->start(inner_->all_reduce_async(staged_in, staged_out, count, dtype, op));
  return work;
}

std::unique_ptr<Communicator> StagedCommunicator::wrap(std::unique_ptr<Communicator> inner_group) {
  return std::make_unique<StagedCommunicator>(std::move(inner_group));
}

namespace {
std::unique_ptr<Communicator> make_staged(const BackendSpec& spec, const CommOptions& options) {
  if (spec.args.size() != 1) {
    throw Error(Error::Kind::invalid_argument,
                "backend staged takes exactly one argument, the host backend: staged(INNER), e.g. staged(mpi)");
  }
  return std::make_unique<StagedCommunicator>(make_communicator(spec.args[0], options));
}
}  // namespace

DTS_REGISTER_BACKEND("staged", "staged(INNER)",
                     "device memory carried through INNER's host memory, a copy each way per call (ranks that "
                     "share one GPU)",
                     make_staged);

}  // namespace dts

// HostStaging: lets a test written for host buffers run a device-memory backend (nccl). Every call
// copies its host input into device Buffers, calls the backend on them, waits for it
// (synchronize()) and copies the output back. Input and output that overlap (in place, including
// reduce_scatter's and all_gather's slices) share one device buffer laid out as on the host, so the
// backend sees the same in-place call. Bytes past a call's output on the host are not staged: a
// backend that writes past its output on the device is not seen by the test's guard bytes.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>

#include "comm/forwarding_communicator.h"
#include "core/buffer.h"

namespace dts::testing {

class HostStaging final : public ForwardingCommunicator {
 public:
  explicit HostStaging(std::unique_ptr<Communicator> inner) : ForwardingCommunicator(std::move(inner), "staged") {}
  Memory memory() const override { return Memory::host; }

  void all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) override {
    Staged s(*inner_, in, bytes(count, dtype), out, bytes(count, dtype));
    inner_->all_reduce(s.in(), s.out(), count, dtype, op);
    s.finish();
  }
  void reduce_scatter(const void* in, void* out, size_t out_count, DType dtype, ReduceOp op) override {
    Staged s(*inner_, in, bytes(out_count, dtype) * n(), out, bytes(out_count, dtype));
    inner_->reduce_scatter(s.in(), s.out(), out_count, dtype, op);
    s.finish();
  }
  void all_gather(const void* in, void* out, size_t in_count, DType dtype) override {
    Staged s(*inner_, in, bytes(in_count, dtype), out, bytes(in_count, dtype) * n());
    inner_->all_gather(s.in(), s.out(), in_count, dtype);
    s.finish();
  }
  void broadcast(const void* in, void* out, size_t count, DType dtype, int root) override {
    Staged s(*inner_, in, bytes(count, dtype), out, bytes(count, dtype));
    inner_->broadcast(s.in(), s.out(), count, dtype, root);
    s.finish();
  }
  void reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op, int root) override {
    Staged s(*inner_, in, bytes(count, dtype), out, bytes(count, dtype));
    inner_->reduce(s.in(), s.out(), count, dtype, op, root);
    s.finish();
  }
  void all_to_all(const void* in, void* out, size_t count_per_peer, DType dtype) override {
    Staged s(*inner_, in, bytes(count_per_peer, dtype) * n(), out, bytes(count_per_peer, dtype) * n());
    inner_->all_to_all(s.in(), s.out(), count_per_peer, dtype);
    s.finish();
  }
  void send(const void* in, size_t count, DType dtype, int peer) override {
    Staged s(*inner_, in, bytes(count, dtype), nullptr, 0);
    inner_->send(s.in(), count, dtype, peer);
    s.finish();
  }
  void recv(void* out, size_t count, DType dtype, int peer) override {
    Staged s(*inner_, nullptr, 0, out, bytes(count, dtype));
    inner_->recv(s.out(), count, dtype, peer);
    s.finish();
  }
  void send_recv(const void* in, int send_peer, void* out, int recv_peer, size_t count, DType dtype) override {
    Staged s(*inner_, in, bytes(count, dtype), out, bytes(count, dtype));
    inner_->send_recv(s.in(), send_peer, s.out(), recv_peer, count, dtype);
    s.finish();
  }
  std::unique_ptr<Work> isend(const void* in, size_t count, DType dtype, int peer) override {
    auto s = std::make_unique<Staged>(*inner_, in, bytes(count, dtype), nullptr, 0);
    auto work = inner_->isend(s->in(), count, dtype, peer);
    return std::make_unique<StagedWork>(std::move(work), std::move(s));
  }
  std::unique_ptr<Work> irecv(void* out, size_t count, DType dtype, int peer) override {
    auto s = std::make_unique<Staged>(*inner_, nullptr, 0, out, bytes(count, dtype));
    auto work = inner_->irecv(s->out(), count, dtype, peer);
    return std::make_unique<StagedWork>(std::move(work), std::move(s));
  }
  std::unique_ptr<Work> all_reduce_async(const void* in, void* out, size_t count, DType dtype, ReduceOp op) override {
    auto s = std::make_unique<Staged>(*inner_, in, bytes(count, dtype), out, bytes(count, dtype));
    auto work = inner_->all_reduce_async(s->in(), s->out(), count, dtype, op);
    return std::make_unique<StagedWork>(std::move(work), std::move(s));
  }

 private:
  static size_t bytes(size_t count, DType dtype) { return count * size_of(dtype); }
  size_t n() const { return static_cast<size_t>(size()); }

  // The device side of one call: the host ranges [in, in + in_bytes) and [out, out + out_bytes),
  // one device buffer over both where they overlap (in place), else one each.
  class Staged {
   public:
    Staged(Communicator& comm, const void* in, size_t in_bytes, void* out, size_t out_bytes)
        : comm_(comm), host_out_(static_cast<char*>(out)), out_bytes_(out_bytes) {
      const auto* host_in = static_cast<const char*>(in);
      const auto begin = [](const char* p) { return reinterpret_cast<uintptr_t>(p); };
      const bool overlap = in && out && begin(host_in) < begin(host_out_) + std::max<size_t>(out_bytes, 1) &&
                           begin(host_out_) < begin(host_in) + std::max<size_t>(in_bytes, 1);
      if (overlap) {
        const char* low = std::min(host_in, static_cast<const char*>(host_out_));
        const char* high = std::max(host_in + in_bytes, static_cast<const char*>(host_out_) + out_bytes);
        shared_ = Buffer(Memory::device, static_cast<size_t>(high - low));
        shared_.copy_from_host(low, shared_.bytes());
        in_ = static_cast<char*>(shared_.data()) + (host_in - low);
        out_ = static_cast<char*>(shared_.data()) + (host_out_ - low);
        return;
      }
      if (in) {
        in_buffer_ = Buffer(Memory::device, in_bytes);
        in_buffer_.copy_from_host(host_in, in_bytes);
        in_ = in_buffer_.data();
      }
      if (out) {
        out_buffer_ = Buffer(Memory::device, out_bytes);
        out_buffer_.copy_from_host(host_out_, out_bytes);  // what the backend must not overwrite stays
        out_ = out_buffer_.data();
      }
    }
    const void* in() const { return in_; }
    void* out() const { return out_; }
    // Waits for the backend, then brings the output home.
    void finish() {
      comm_.synchronize();
      if (!host_out_ || out_bytes_ == 0) return;
      const Buffer& from = shared_.data() ? shared_ : out_buffer_;
      from.copy_to_host(host_out_, out_bytes_, static_cast<size_t>(static_cast<char*>(out_) - static_cast<const char*>(from.data())));
    }

   private:
    Communicator& comm_;
    char* host_out_;
    size_t out_bytes_;
    Buffer shared_, in_buffer_, out_buffer_;
    const void* in_ = nullptr;
    void* out_ = nullptr;
  };

  class StagedWork final : public Work {
   public:
    StagedWork(std::unique_ptr<Work> work, std::unique_ptr<Staged> staged)
        : work_(std::move(work)), staged_(std::move(staged)) {}
    bool test() override { return work_->test(); }
    void wait(std::chrono::duration<double> timeout) override {
      work_->wait(timeout);
      if (staged_) staged_->finish();
      staged_.reset();
    }

   private:
    std::unique_ptr<Work> work_;
    std::unique_ptr<Staged> staged_;
  };

  std::unique_ptr<Communicator> wrap(std::unique_ptr<Communicator> inner_group) override {
    return std::make_unique<HostStaging>(std::move(inner_group));
  }
};

}  // namespace dts::testing

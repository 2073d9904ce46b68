// ForwardingCommunicator: the base of wrapper backends such as ring(INNER) and faulty(KIND,INNER).
// It forwards every operation of Communicator to INNER, so a wrapper overrides only what it
// changes, and an operation it forgets reaches INNER instead of the default body (unsupported: SKIP).
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "comm/communicator.h"

namespace dts {

class ForwardingCommunicator : public Communicator {
 public:
  std::string_view backend() const override { return spec_; }
  std::string version() const override { return inner_->version(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Memory memory() const override { return inner_->memory(); }
  bool reaches_device_by_copies() const override { return inner_->reaches_device_by_copies(); }

  void all_reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op) override {
    inner_->all_reduce(in, out, count, dtype, op);
  }
  void reduce_scatter(const void* in, void* out, size_t out_count, DType dtype, ReduceOp op) override {
    inner_->reduce_scatter(in, out, out_count, dtype, op);
  }
  void all_gather(const void* in, void* out, size_t in_count, DType dtype) override {
    inner_->all_gather(in, out, in_count, dtype);
  }
  void broadcast(const void* in, void* out, size_t count, DType dtype, int root) override {
    inner_->broadcast(in, out, count, dtype, root);
  }
  void reduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op, int root) override {
    inner_->reduce(in, out, count, dtype, op, root);
  }
  void all_to_all(const void* in, void* out, size_t count_per_peer, DType dtype) override {
    inner_->all_to_all(in, out, count_per_peer, dtype);
  }
  void send(const void* in, size_t count, DType dtype, int peer) override { inner_->send(in, count, dtype, peer); }
  void recv(void* out, size_t count, DType dtype, int peer) override { inner_->recv(out, count, dtype, peer); }
  void send_recv(const void* in, int send_peer, void* out, int recv_peer, size_t count, DType dtype) override {
    inner_->send_recv(in, send_peer, out, recv_peer, count, dtype);
  }
  std::unique_ptr<Work> isend(const void* in, size_t count, DType dtype, int peer) override {
    return inner_->isend(in, count, dtype, peer);
  }
  std::unique_ptr<Work> irecv(void* out, size_t count, DType dtype, int peer) override {
    return inner_->irecv(out, count, dtype, peer);
  }
  std::unique_ptr<Work> all_reduce_async(const void* in, void* out, size_t count, DType dtype,
                                         ReduceOp op) override {
    return inner_->all_reduce_async(in, out, count, dtype, op);
  }
  void barrier() override { inner_->barrier(); }
  void synchronize() override { inner_->synchronize(); }
  std::unique_ptr<Timer> timer(size_t marks) override { return inner_->timer(marks); }
  // Splits INNER and hands each group to wrap(), so the groups are the same wrapper.
  std::unique_ptr<Communicator> split(int color, int key) override;
  bool aborted() const override { return inner_->aborted(); }
  void abort() override { inner_->abort(); }
  void use_datatype_name(DType dtype, std::string_view name) override { inner_->use_datatype_name(dtype, name); }

 protected:
  // The spec is NAME(LEADING_ARGS,INNER), or NAME(INNER) without leading args: "ring(mpi)",
  // "faulty(bitflip,mpi)". A null `inner` is an Error{invalid_argument} naming the wrapper.
  ForwardingCommunicator(std::unique_ptr<Communicator> inner, std::string_view name,
                         std::string_view leading_args = {});

  // This wrapper, with its options, around `inner_group` (a group of INNER made by split()).
  virtual std::unique_ptr<Communicator> wrap(std::unique_ptr<Communicator> inner_group) = 0;

  // Never null. Protected, not private: wrappers build their own operations on INNER's.
  std::unique_ptr<Communicator> inner_;

 private:
  std::string spec_;
};

}  // namespace dts

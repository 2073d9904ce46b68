// A one-rank Communicator that only records which operations reached it, with the memory kind a
// test chooses: for one-process tests of wrappers (forwarding, faulty's set-up checks) without MPI
// and without a device.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"

namespace dts::testing {

class FakeCommunicator final : public Communicator {
 public:
  // `log` is shared, so a test still reads it after a wrapper took ownership of this communicator.
  using Log = std::vector<std::string>;
  explicit FakeCommunicator(std::string name = "fake", Memory memory = Memory::host,
                            std::shared_ptr<Log> log = std::make_shared<Log>())
      : name_(std::move(name)), memory_(memory), log_(std::move(log)) {}

  const std::shared_ptr<Log>& log() const { return log_; }

  std::string_view backend() const override { return name_; }
  std::string version() const override { return name_ + " 1.0"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Memory memory() const override { return memory_; }

  void all_reduce(const void*, void*, size_t, DType, ReduceOp) override { log_->push_back("all_reduce"); }
  void reduce_scatter(const void*, void*, size_t, DType, ReduceOp) override { log_->push_back("reduce_scatter"); }
  void all_gather(const void*, void*, size_t, DType) override { log_->push_back("all_gather"); }
  void broadcast(const void*, void*, size_t, DType, int) override { log_->push_back("broadcast"); }
  void reduce(const void*, void*, size_t, DType, ReduceOp, int) override { log_->push_back("reduce"); }
  void all_to_all(const void*, void*, size_t, DType) override { log_->push_back("all_to_all"); }
  void send(const void*, size_t, DType, int) override { log_->push_back("send"); }
  void recv(void*, size_t, DType, int) override { log_->push_back("recv"); }
  void send_recv(const void*, int, void*, int, size_t, DType) override { log_->push_back("send_recv"); }
  std::unique_ptr<Work> isend(const void*, size_t, DType, int) override { return logged("isend"); }
  std::unique_ptr<Work> irecv(void*, size_t, DType, int) override { return logged("irecv"); }
  std::unique_ptr<Work> all_reduce_async(const void*, void*, size_t, DType, ReduceOp) override {
    return logged("all_reduce_async");
  }
  void barrier() override { log_->push_back("barrier"); }
  std::unique_ptr<Communicator> split(int, int) override {
    log_->push_back("split");
    return std::make_unique<FakeCommunicator>(name_, memory_, log_);
  }

 private:
  std::unique_ptr<Work> logged(const char* op) {
    log_->push_back(op);
    return std::make_unique<CompletedWork>();
  }

  std::string name_;
  Memory memory_;
  std::shared_ptr<Log> log_;
};

}  // namespace dts::testing

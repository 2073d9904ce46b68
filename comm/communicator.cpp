// Default bodies of the Communicator interface (unsupported -> SKIP), spec parsing and the
// backend registry.
#include "comm/communicator.h"

#include <map>
#include <mutex>
#include <thread>

namespace dts {

void wait_quietly(Work& work, std::chrono::microseconds nap) {
  while (!work.test()) std::this_thread::sleep_for(nap);
}

void Communicator::unsupported(std::string_view op) const {
  throw Error(Error::Kind::unsupported,
              "backend " + std::string(backend()) + " does not implement " + std::string(op));
}

void Communicator::use_datatype_name(DType dtype, std::string_view name) {
  if (name.empty()) return;
  throw Error(Error::Kind::invalid_argument, "backend " + std::string(backend()) + " has one name for " +
                                                 std::string(dts::name(dtype)) + ", not " + std::string(name));
}

void Communicator::all_reduce(const void*, void*, size_t, DType, ReduceOp) { unsupported("all_reduce"); }
void Communicator::reduce_scatter(const void*, void*, size_t, DType, ReduceOp) { unsupported("reduce_scatter"); }
void Communicator::all_gather(const void*, void*, size_t, DType) { unsupported("all_gather"); }
void Communicator::broadcast(const void*, void*, size_t, DType, int) { unsupported("broadcast"); }
void Communicator::reduce(const void*, void*, size_t, DType, ReduceOp, int) { unsupported("reduce"); }
void Communicator::all_to_all(const void*, void*, size_t, DType) { unsupported("all_to_all"); }
void Communicator::send(const void*, size_t, DType, int) { unsupported("send"); }
void Communicator::recv(void*, size_t, DType, int) { unsupported("recv"); }
void Communicator::send_recv(const void*, int, void*, int, size_t, DType) { unsupported("send_recv"); }

std::unique_ptr<Work> Communicator::isend(const void* in, size_t count, DType dtype, int peer) {
  send(in, count, dtype, peer);
  return std::make_unique<CompletedWork>();
}

std::unique_ptr<Work> Communicator::irecv(void* out, size_t count, DType dtype, int peer) {
  recv(out, count, dtype, peer);
  return std::make_unique<CompletedWork>();
}

std::unique_ptr<Work> Communicator::all_reduce_async(const void* in, void* out, size_t count, DType dtype,
                                                     ReduceOp op) {
  all_reduce(in, out, count, dtype, op);
  return std::make_unique<CompletedWork>();
}

namespace {

class HostTimer final : public Timer {
 public:
  HostTimer(Communicator& comm, size_t marks) : comm_(comm) { marks_.reserve(marks); }
  void mark() override {
    comm_.synchronize();
    marks_.push_back(std::chrono::steady_clock::now());
  }
  std::vector<double> intervals() override {
    std::vector<double> out;
    for (size_t i = 1; i < marks_.size(); ++i) {
      out.push_back(std::chrono::duration<double>(marks_[i] - marks_[i - 1]).count());
    }
    return out;
  }

 private:
  Communicator& comm_;
  std::vector<std::chrono::steady_clock::time_point> marks_;
};

}  // namespace

std::unique_ptr<Timer> Communicator::timer(size_t marks) { return std::make_unique<HostTimer>(*this, marks); }

// One pass over the spec, so each level costs its own length. make_communicator() parses each
// level again when a wrapper's factory builds its inner backend, which is why the nesting is
// bounded up front: with at most kMaxBackendSpecDepth levels the whole stack costs at most that
// many passes (linear in the spec's length) and as many factory frames on the stack, where an
// unbounded spec (ring(ring(...)) 18,000 deep) overflowed the stack.
BackendSpec parse_backend_spec(std::string_view spec) {
  auto bad = [&](const std::string& why) {
    return Error(Error::Kind::invalid_argument, "bad backend spec " + quoted_input(spec) + ": " + why);
  };
  BackendSpec out;
  const auto open = spec.find('(');
  if (open == std::string_view::npos) {
    if (spec.empty() || spec.find_first_of("),") != std::string_view::npos) throw bad("expected NAME or NAME(ARGS)");
    out.name = std::string(spec);
    return out;
  }
  if (open == 0 || spec.back() != ')') throw bad("expected NAME(ARGS)");
  out.name = std::string(spec.substr(0, open));
  // The outer parentheses are level 1; the scan stops at the first level past the limit, so a
  // spec too deep is refused after reading only that far.
  const std::string_view inner = spec.substr(open + 1, spec.size() - open - 2);
  int depth = 1;
  size_t start = 0;
  for (size_t i = 0; i <= inner.size(); ++i) {
    const char c = i < inner.size() ? inner[i] : ',';
    if (c == '(' && ++depth > kMaxBackendSpecDepth) {
      throw bad("nested deeper than " + std::to_string(kMaxBackendSpecDepth) + " levels");
    }
    if (c == ')' && --depth < 1) throw bad("unbalanced parentheses");
    if (c == ',' && depth == 1) {
      const std::string_view arg = inner.substr(start, i - start);
      if (arg.empty()) throw bad("empty argument");
      out.args.emplace_back(arg);
      start = i + 1;
    }
  }
  if (depth != 1) throw bad("unbalanced parentheses");
  return out;
}

namespace {
struct Registry {
  std::mutex mutex;
  std::map<std::string, std::pair<BackendInfo, BackendFactory>> backends;
};
Registry& registry() {
  static Registry r;
  return r;
}
}  // namespace

bool register_backend(BackendInfo info, BackendFactory factory) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  std::string key = info.name;
  r.backends[key] = {std::move(info), std::move(factory)};
  return true;
}

std::vector<BackendInfo> registered_backends() {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<BackendInfo> out;
  for (auto& [name, entry] : r.backends) out.push_back(entry.first);
  return out;
}

std::unique_ptr<Communicator> make_communicator(std::string_view spec, const CommOptions& options) {
  const BackendSpec parsed = parse_backend_spec(spec);
  BackendFactory factory;
  {
    auto& r = registry();
    std::lock_guard lock(r.mutex);
    auto it = r.backends.find(parsed.name);
    if (it == r.backends.end()) {
      std::string known;
      for (auto& [name, entry] : r.backends) known += (known.empty() ? "" : ", ") + entry.first.usage;
      throw Error(Error::Kind::invalid_argument,
                  "unknown backend " + quoted_input(parsed.name) + " (this build has: " + known + ")");
    }
    factory = it->second.second;
  }
  return factory(parsed, options);
}

std::string_view name(ObservedOp op) {
  static constexpr std::string_view kNames[] = {"none",     "all_reduce", "reduce_scatter", "all_gather", "broadcast",
                                                "reduce",   "all_to_all", "send",           "recv",       "send_recv",
                                                "isend",    "irecv",      "wait",           "barrier",    "all_reduce_async"};
  const auto i = static_cast<size_t>(op);
  return i < std::size(kNames) ? kNames[i] : "none";
}

ObservedOp observed_op_of(int64_t code) {
  return code > 0 && code <= static_cast<int64_t>(ObservedOp::all_reduce_async) ? static_cast<ObservedOp>(code)
                                                                                : ObservedOp::none;
}

}  // namespace dts

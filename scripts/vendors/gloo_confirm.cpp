// The deviations dtsuite's collectives suite finds in Gloo, shown on Gloo alone: no dtsuite code,
// no MPI. Two ranks are two threads of this process, bootstrapped the way Gloo's own examples
// are (rendezvous::Context::connectFullMesh over an in-process HashStore), on loopback TCP, and
// each deviation is one call of Gloo's API with the reduction functions of gloo/math.h, which
// is what a user of Gloo (PyTorch's Gloo process group among them) passes.
//
//   gloo_confirm    prints one line per deviation; exit 0 when every one shows, 1 when one does
//                   not (the library changed: results/expectations/gloo-*.toml and the gloo
//                   backend's refusals are then stale)
//
// ctest gloo_confirm_test runs it (builds with Gloo).
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/transport/tcp/device.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

namespace {

constexpr int kRanks = 2;

// Runs body(context) on kRanks threads, one rank each.
void on_two_ranks(const std::function<void(const std::shared_ptr<gloo::Context>&)>& body) {
  gloo::rendezvous::HashStore store;
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < kRanks; ++rank) {
    ranks.emplace_back([&, rank] {
      auto device = gloo::transport::tcp::CreateDevice(attr);
      auto context = std::make_shared<gloo::rendezvous::Context>(rank, kRanks);
      context->connectFullMesh(store, device);
      body(context);
    });
  }
  for (auto& t : ranks) t.join();
}

using Untyped = void (*)(void*, const void*, const void*, size_t);

// all_reduce of one float per rank: rank 0 holds `first`, rank 1 `second`.
float all_reduce_two(float first, float second, Untyped fn) {
  float result[kRanks] = {};
  on_two_ranks([&](const std::shared_ptr<gloo::Context>& context) {
    float value = context->rank == 0 ? first : second;
    gloo::AllreduceOptions opts(context);
    opts.setOutput(&value, 1);
    opts.setReduceFunction(fn);
    gloo::allreduce(opts);
    result[context->rank] = value;
  });
  return result[0];
}

}  // namespace

int main() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  int missing = 0;
  // gloo/math.h's min and max are std::min and std::max, which return their first argument when
  // the comparison with NaN is false: a NaN on one side survives, on the other it is dropped.
  const struct {
    const char* what;
    Untyped fn;
  } reductions[] = {{"min", static_cast<Untyped>(&gloo::min<float>)}, {"max", static_cast<Untyped>(&gloo::max<float>)}};
  for (const auto& r : reductions) {
    const float nan_first = all_reduce_two(nan, 1.0F, r.fn), nan_second = all_reduce_two(1.0F, nan, r.fn);
    const bool dropped = !std::isnan(nan_first) || !std::isnan(nan_second);
    std::printf("%s: all_reduce %s of {NaN, 1} gives %g, of {1, NaN} gives %g: NaN %s by %s\n",
                dropped ? "shown" : "NOT SHOWN", r.what, static_cast<double>(nan_first),
                static_cast<double>(nan_second), dropped ? "dropped" : "kept", r.what);
    missing += dropped ? 0 : 1;
  }
  // An allgather of 0 bytes on 2 ranks: its ring takes offsets modulo the output's size
  // (gloo/allgather.cc, "% outBytes"), a division by zero. In a child, so that this one lives on.
  std::fflush(stdout);
  const pid_t child = fork();
  if (child == 0) {
    on_two_ranks([](const std::shared_ptr<gloo::Context>& context) {
      char none = 0;
      gloo::AllgatherOptions opts(context);
      opts.setOutput(&none, 0);
      gloo::allgather(opts);
    });
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  const bool died = WIFSIGNALED(status) && WTERMSIG(status) == SIGFPE;
  std::printf("%s: allgather of 0 bytes on 2 ranks %s\n", died ? "shown" : "NOT SHOWN",
              died                   ? "died of SIGFPE"
              : WIFSIGNALED(status) ? "died of another signal"
                                     : "returned");
  missing += died ? 0 : 1;
  return missing == 0 ? 0 : 1;
}

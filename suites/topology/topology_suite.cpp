// The topology suite: links are not alike. Point-to-point bandwidth (one way, each direction, and
// both ways at once) and latency between every pair of ranks through the stack under test, each
// pair classed same-node or other-node (comm/topology.h), as a matrix in the CSV and a heat map
// in the report; and what the wire carried during a collective: the bytes the nodes' interface
// counters saw (link_counters.h) over the time and the link's rated speed (link_utilization),
// beside what the library claims (busbw over the same speed).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "comm/text.h"
#include "core/cpus.h"
#include "core/buffer.h"
#include "core/error.h"
#include "results/noise.h"
#include "results/outliers.h"
#include "suites/flag_checks.h"
#include "suites/memory_fit.h"
#include "suites/suite.h"
#include "suites/topology/link_counters.h"

namespace dts {

namespace {

class TopologyFlags final : public FlagGroup {
 public:
  static constexpr const char* kGroup = "topology";
  int64_t p2p_bytes = int64_t{4} << 20;   // one message of the bandwidth matrix
  int64_t latency_bytes = 8;              // one message of the latency matrix
  int64_t link_bytes = int64_t{64} << 20; // the collective whose wire bytes are counted
  double link_speed = 0;                  // bits per second; 0: each link's own rated speed
  // One-way message sizes timed beside --p2p-bytes (--p2p-sweep MIN:MAX, x4): the line a
  // message's time follows between latency and bandwidth, where a library may change protocol.
  std::vector<int64_t> sweep;
  // What --quick did to the sweep, said in the preamble and on the sweep's rows; "": nothing.
  std::string quick_note;

  void declare(CLI::App& g) override {
    g.add_option("--p2p-bytes", p2p_text_, "message size of the point-to-point bandwidth matrix (suffixes K, M, G)")
        ->capture_default_str();
    g.add_option("--latency-bytes", latency_text_, "message size of the latency matrix")->capture_default_str();
    g.add_option("--link-bytes", link_text_, "size of the all_reduce whose wire bytes are counted")
        ->capture_default_str();
    g.add_option("--link-speed", speed_text_, "rated speed of the links, bits per second (1gbit, 100G); default: "
                                              "what each interface reports");
    g.add_option("--p2p-sweep", sweep_text_, "also time one-way messages of every size from MIN to MAX, x4 "
                                             "(e.g. 8:4M; the planner's line of a link between latency and bandwidth)")
        // Empty is "no sweep" only when the flag is left out: given empty, it is a script's unset variable.
        ->check(NotEmpty("MIN:MAX, e.g. 8:4M", "MIN:MAX"));
  }
  void finish(const RunOptions& common) override {
    p2p_bytes = parse_size(p2p_text_);
    latency_bytes = parse_size(latency_text_);
    link_bytes = parse_size(link_text_);
    if (common.quick) {
      p2p_bytes = std::min<int64_t>(p2p_bytes, int64_t{256} << 10);
      link_bytes = std::min<int64_t>(link_bytes, int64_t{4} << 20);
    }
    if (p2p_bytes <= 0 || link_bytes < 4 || link_bytes % 4 != 0) {
      throw Error(Error::Kind::invalid_argument,
                  "--p2p-bytes must be positive and --link-bytes a positive whole number of f32 elements");
    }
    if (latency_bytes <= 0 || latency_bytes > p2p_bytes) {
      throw Error(Error::Kind::invalid_argument, "--latency-bytes must be positive and at most --p2p-bytes (" +
                                                     std::to_string(p2p_bytes) + ")");
    }
    link_speed = speed_text_.empty() ? 0 : parse_link_speed(speed_text_);
    sweep.clear();
    quick_note.clear();
    if (!sweep_text_.empty()) {
      const size_t colon = sweep_text_.find(':');
      if (colon == std::string::npos) {
        throw Error(Error::Kind::invalid_argument, "--p2p-sweep takes MIN:MAX (e.g. 8:4M), not '" + sweep_text_ + "'");
      }
      int64_t lo = parse_size(sweep_text_.substr(0, colon)), hi = parse_size(sweep_text_.substr(colon + 1));
      if (lo <= 0 || hi < lo) {
        throw Error(Error::Kind::invalid_argument, "--p2p-sweep MIN:MAX needs 0 < MIN <= MAX, not '" + sweep_text_ + "'");
      }
      if (common.quick && hi > kQuickBytes) {  // as --p2p-bytes: at most 256K
        if (lo > kQuickBytes) {
          throw Error(Error::Kind::invalid_argument, "--p2p-sweep " + quoted_input(sweep_text_) +
                                                         " under --quick: every size is above --quick's 256K, so "
                                                         "nothing would be swept (MIN at most 256K, or no --quick)");
        }
        hi = kQuickBytes;
        quick_note = "--quick cut --p2p-sweep " + sweep_text_ + " at 256K";
      }
      // MIN, x4 while below MAX, and MAX itself (parse_size keeps both far below overflow).
      for (int64_t b = lo; b < hi; b *= 4) sweep.push_back(b);
      sweep.push_back(hi);
      std::erase(sweep, p2p_bytes);  // timed anyway, as the matrix's message
    }
  }
  std::string describe() const override {
    return "topology: p2p " + std::to_string(p2p_bytes) + " B" +
           (sweep.empty() ? "" : " (one way also " + std::to_string(sweep.front()) + " to " + std::to_string(sweep.back()) + " B)") +
           (quick_note.empty() ? "" : " (" + quick_note + ")") +
           ", latency " + std::to_string(latency_bytes) + " B, link all_reduce " + std::to_string(link_bytes) + " B" +
           (link_speed > 0 ? ", rated " + std::to_string(link_speed / 1e9) + " Gbit/s" : "");
  }

 private:
  static constexpr int64_t kQuickBytes = int64_t{256} << 10;  // --quick's largest p2p message
  std::string p2p_text_ = "4M", latency_text_ = "8", link_text_ = "64M", speed_text_, sweep_text_;
};
DTS_REGISTER_FLAGS(TopologyFlags, "Topology suite");

// Round trips per latency sample: the barrier's exit skew (about one one-way latency) shrinks to
// a twentieth of a sample's time.
constexpr int kRoundTrips = 10;

struct PairCase {
  int a = 0, b = 0;  // a < b
};
struct LinkCase {};
struct PeersCase {};

// One cell of the matrix as rank 0 keeps it for the peers case: a pair's figure in one direction
// (p2p_bandwidth one-way or both, p2p_latency), its median over the iterations and their spread.
struct Cell {
  std::string metric, direction;
  int src = 0, dst = 0;
  bool same_node = false;
  double value = 0, spread = 0;
  std::vector<double> samples;  // the iterations' figures
};

// Where ranks outnumber the CPUs of their machine, which two of them share a core is the
// scheduler's doing, and it moves a pair's figures more than their spread shows: measured on 4
// ranks of a 2-core machine, with the other ranks asleep, the pairs whose ranks shared a core came
// out up to 2.4x slower in bandwidth and 3.6x longer in latency than the rest, run after run, each
// within a few percent over its iterations. There a cell, rank or node is named only beyond a
// factor of 4 from its peers' median in bandwidth, and of 10 in latency (a ping-pong whose two
// ranks share a core waits for the scheduler at every message).
constexpr double kCrowdedFactor = 4;
constexpr double kCrowdedLatencyFactor = 10;

class TopologySuite final : public Suite {
 public:
  std::string_view name() const override { return "topology"; }

  std::vector<Case> plan(const RunOptions& common) const override {
    const TopologyFlags& f = common.flags<TopologyFlags>();
    // Before anything is allocated: a pair's rank holds an outgoing and an incoming buffer of the
    // largest message (the matrix's or the sweep's), 2 bytes a byte; the link case an all_reduce
    // of --link-bytes in place and room for a library's scratch copy, 2 bytes a byte too.
    int64_t largest = std::max(f.p2p_bytes, f.link_bytes);
    for (int64_t b : f.sweep) largest = std::max(largest, b);
    check_fits("topology: a message of " + format_bytes(static_cast<double>(largest)), 2.0 * static_cast<double>(largest),
               "2 bytes a byte of the largest message: the buffer sent and the one received",
               common.memory_per_rank(), "lower --p2p-sweep's MAX, --p2p-bytes or --link-bytes");
    std::vector<Case> cases;
    Labels pair_labels;  // the pairs' and the peers case's
    pair_labels.op = "send_recv";
    pair_labels.dtype = "u8";
    pair_labels.bytes = f.p2p_bytes;
    for (int a = 0; a < common.world_size; ++a) {
      for (int b = a + 1; b < common.world_size; ++b) {
        cases.push_back({"p2p/" + std::to_string(a) + "-" + std::to_string(b), pair_labels, PairCase{a, b}});
      }
    }
    // Who falls short of their peers, judged from the cells above (results/outliers.h): pairs,
    // ranks and nodes. Two ranks give a pair or a rank no peer, but two nodes of one rank each
    // are judged by their iterations.
    if (common.world_size >= 2) cases.push_back({"peers", pair_labels, PeersCase{}});
    Labels l;
    l.op = "all_reduce";
    l.dtype = "f32";
    l.bytes = f.link_bytes;
    cases.push_back({"link/all_reduce/" + std::to_string(f.link_bytes), l, LinkCase{}});
    return cases;
  }

  void run(const Case& c, RunContext& ctx) override {
    if (const auto* pair = std::any_cast<PairCase>(&c.params)) run_pair(c, *pair, ctx, cells_);
    else if (std::any_cast<PeersCase>(&c.params)) run_peers(c, ctx, cells_);
    else run_link(c, ctx);
  }

 private:
  // The pair's rows: one-way bandwidth each direction, both ways at once, and latency. Only the
  // two ranks touch the stack; every rank takes part in the control splits and barriers.
  static void run_pair(const Case& c, const PairCase& p, RunContext& ctx, std::vector<Cell>& cells) {
    const RunOptions& common = ctx.options();
    const TopologyFlags& f = common.flags<TopologyFlags>();
    Communicator& comm = ctx.comm();
    Communicator& control = ctx.control();
    const int rank = control.rank();
    const bool member = rank == p.a || rank == p.b;
    std::unique_ptr<Communicator> pair = control.split(member ? 0 : 1, rank);
    const RunContext::Participants who = ctx.participants(member);
    const NodeMap& nodes = ctx.topology().nodes;
    const bool same_node = nodes.node_of_rank[static_cast<size_t>(p.a)] == nodes.node_of_rank[static_cast<size_t>(p.b)];

    // Times in seconds, each the slower member's, per iteration: [a->b, b->a, both, latency], then
    // a->b and b->a at each size of the sweep.
    std::vector<std::vector<double>> times(4 + 2 * f.sweep.size());
    std::exception_ptr failure;
    if (member) try {
      const int peer = rank == p.a ? p.b : p.a;
      const size_t big = static_cast<size_t>(f.p2p_bytes), small = static_cast<size_t>(std::max<int64_t>(f.latency_bytes, 1));
      int64_t largest = f.p2p_bytes;
      for (int64_t b : f.sweep) largest = std::max(largest, b);
      // The messages live where the stack takes them (device memory for nccl and staged(INNER)):
      // written through a host image, and what arrived read back the same way.
      const Memory memory = ctx.memory();
      const std::vector<uint8_t> pattern(static_cast<size_t>(largest), static_cast<uint8_t>(rank + 1));
      Buffer out_buffer(memory, pattern.size()), in_buffer(memory, pattern.size()), ack_buffer(memory, 1);
      out_buffer.copy_from_host(pattern.data(), pattern.size());
      const std::vector<uint8_t> zeros(pattern.size(), 0);
      in_buffer.copy_from_host(zeros.data(), zeros.size());
      ack_buffer.copy_from_host(zeros.data(), 1);
      void* const out = out_buffer.data();
      void* const in = in_buffer.data();
      void* const ack = ack_buffer.data();
      // A device stack's calls return once queued: the clock stops when the stack is done.
      const auto timed = [&](const std::function<void()>& body) {
        std::vector<double> samples;
        for (int i = 0; i < common.warmup + common.iters; ++i) {
          pair->barrier();
          const auto start = std::chrono::steady_clock::now();
          body();
          comm.synchronize();
          double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          pair->all_reduce(&elapsed, &elapsed, 1, DType::f64, ReduceOp::max);
          if (i >= common.warmup) samples.push_back(elapsed);
        }
        return samples;
      };
      // One way: the sender's time until the receiver's one-byte acknowledgement is back, so the
      // whole message has arrived (the ack's latency is small beside a large message).
      const auto one_way = [&](int from, size_t bytes) {
        return timed([&] {
          if (rank == from) {
            comm.send(out, bytes, DType::u8, peer);
            comm.recv(ack, 1, DType::u8, peer);
          } else {
            comm.recv(in, bytes, DType::u8, peer);
            comm.send(ack, 1, DType::u8, peer);
          }
        });
      };
      for (size_t k = 0; k < f.sweep.size(); ++k) {
        times[4 + 2 * k] = one_way(p.a, static_cast<size_t>(f.sweep[k]));
        times[5 + 2 * k] = one_way(p.b, static_cast<size_t>(f.sweep[k]));
      }
      times[0] = one_way(p.a, big);
      times[1] = one_way(p.b, big);
      times[2] = timed([&] { comm.send_recv(out, peer, in, peer, big, DType::u8); });
      // Latency: half a round trip of a small message (ping-pong), kRoundTrips of them back to back
      // per sample, so the skew of the members leaving the barrier is spread over them.
      std::vector<double> round = timed([&] {
        for (int k = 0; k < kRoundTrips; ++k) {
          if (rank == p.a) {
            comm.send(out, small, DType::u8, peer);
            comm.recv(in, small, DType::u8, peer);
          } else {
            comm.recv(in, small, DType::u8, peer);
            comm.send(out, small, DType::u8, peer);
          }
        }
      });
      for (double t : round) times[3].push_back(t / (2 * kRoundTrips));
      // Each member checks what it received last: the peer's pattern (rank + 1), byte for byte.
      const auto expected = static_cast<uint8_t>(peer + 1);
      std::vector<uint8_t> received(big);
      in_buffer.copy_to_host(received.data(), big);
      for (size_t i = 0; i < big; ++i) {
        if (received[i] != expected) {
          throw Error(Error::Kind::mismatch, "p2p " + std::to_string(peer) + " -> " + std::to_string(rank) + ": byte " +
                                                 std::to_string(i) + " is " + std::to_string(received[i]) + ", not " +
                                                 std::to_string(expected));
        }
      }
    } catch (...) {
      failure = std::current_exception();
    }
    // The ranks outside the pair wait for its end asleep, 5 ms at a time: polling in the
    // agreement below, or waking every fraction of a millisecond, they would hold cores the pair
    // is timed on where ranks outnumber cores, and whether the pair's two ranks got a core each
    // would be the scheduler's doing (measured: the two pairs whose ranks shared a core came
    // out 20-60% slower, with a spread of a few percent).
    uint8_t token = 0;
    if (rank == p.a) {
      for (int q = 0; q < control.size(); ++q) {
        if (q != p.a && q != p.b) control.send(&token, 1, DType::u8, q);
      }
    } else if (!member) {
      wait_quietly(*control.irecv(&token, 1, DType::u8, p.a), std::chrono::milliseconds(5));
    }
    leave_together(control, failure);
    if (rank != 0) {
      // Rank 0 writes; a pair without it hands its times over (the a-side holds them all).
      if (rank == p.a && p.a != 0) send_times(control, times);
      return;
    }
    if (p.a != 0) times = receive_times(control, p.a, times.size());
    const std::string link = same_node ? "same-node" : "other-node";
    const auto row = [&](const std::string& metric, const std::string& unit, int src, int dst,
                         const std::string& direction, const std::vector<double>& samples, double scale,
                         int64_t message = 0) {
      Record r;
      r.suite = "topology";
      r.case_id = c.id;
      r.labels = c.labels;
      r.labels.world_size = who.world_size;
      r.labels.nodes = who.nodes;
      r.labels.ranks_per_node = who.ranks_per_node;
      r.labels.config = "src=" + std::to_string(src) + ";dst=" + std::to_string(dst) + ";direction=" + direction +
                        ";link=" + link + ";src_node=" + nodes.names[static_cast<size_t>(src)] +
                        ";dst_node=" + nodes.names[static_cast<size_t>(dst)] + ";job=" + std::to_string(common.world_size);
      r.metric = metric;
      r.unit = unit;
      std::vector<double> values;
      for (double t : samples) values.push_back(scale > 0 ? scale / t : t);
      r.stats = compute_stats(values);
      r.value = r.stats.median;  // the same number the distribution's median column shows
      if (scale <= 0) r.labels.bytes = f.latency_bytes;
      if (message > 0) {
        r.labels.bytes = message;
        r.labels.config += ";sweep=1";  // not a cell of the matrix (the report's heat map leaves it out)
        r.detail = f.quick_note;
      } else if (!values.empty()) {
        cells.push_back({metric, direction, src, dst, same_node, r.value, mad_spread(values), values});
      }
      r.verdict = Verdict::info;
      ctx.emit(r);
    };
    const double bytes = static_cast<double>(f.p2p_bytes);
    row("p2p_bandwidth", "bytes_per_second", p.a, p.b, "one-way", times[0], bytes);
    row("p2p_bandwidth", "bytes_per_second", p.b, p.a, "one-way", times[1], bytes);
    row("p2p_bandwidth", "bytes_per_second", p.a, p.b, "both", times[2], bytes);
    row("p2p_bandwidth", "bytes_per_second", p.b, p.a, "both", times[2], bytes);
    row("p2p_latency", "seconds", p.a, p.b, "round-trip-half", times[3], 0);
    row("p2p_latency", "seconds", p.b, p.a, "round-trip-half", times[3], 0);
    // The sweep's one-way times less the acknowledgement's way back (the pair's half round trip
    // of a small message): at a few bytes the ack is half of what the sender waits.
    const double ack = times[3].empty() ? 0 : median_of(times[3]);
    for (size_t k = 0; k < f.sweep.size(); ++k) {
      const int64_t b = f.sweep[k];
      for (const size_t i : {4 + 2 * k, 5 + 2 * k}) {
        for (double& t : times[i]) t = std::max(t - ack, t * 1e-3);
      }
      row("p2p_bandwidth", "bytes_per_second", p.a, p.b, "one-way", times[4 + 2 * k], static_cast<double>(b), b);
      row("p2p_bandwidth", "bytes_per_second", p.b, p.a, "one-way", times[5 + 2 * k], static_cast<double>(b), b);
    }
  }

  static void send_times(Communicator& control, const std::vector<std::vector<double>>& times) {
    for (const auto& t : times) {
      const auto n = static_cast<int64_t>(t.size());
      control.send(&n, 1, DType::i64, 0);
      control.send(t.data(), t.size(), DType::f64, 0);
    }
  }
  static std::vector<std::vector<double>> receive_times(Communicator& control, int from, size_t count) {
    std::vector<std::vector<double>> times(count);
    for (auto& t : times) {
      int64_t n = 0;
      control.recv(&n, 1, DType::i64, from);
      t.resize(static_cast<size_t>(n));
      control.recv(t.data(), t.size(), DType::f64, from);
    }
    return times;
  }

  // An all_reduce of --link-bytes on every rank through the stack; each node's first rank reads
  // its links' counters before and after the timed iterations.
  static void run_link(const Case& c, RunContext& ctx) {
    const RunOptions& common = ctx.options();
    const TopologyFlags& f = common.flags<TopologyFlags>();
    Communicator& comm = ctx.comm();
    Communicator& control = ctx.control();
    const int rank = control.rank(), world = control.size();
    const RunContext::Topology& topo = ctx.topology();
    const bool reader = topo.local_rank == 0;  // one reader per node: the node's counters are shared
    const auto read = [] {
      auto links = read_link_counters();
      links.merge(read_nvlink_counters());
      return links;
    };
    const size_t count = static_cast<size_t>(f.link_bytes / 4);
    std::vector<float> data;  // the result's host image
    std::map<std::string, LinkCounter> traffic;
    double seconds = 0;
    std::exception_ptr failure;
    try {
      data.assign(count, 1.0f);
      Buffer buffer(ctx.memory(), count * sizeof(float));  // where the stack takes it
      buffer.copy_from_host(data.data(), buffer.bytes());
      void* const on_stack = buffer.data();
      if (reader) read();  // opens NVML (dlopen, init) now, not inside the timed span
      for (int i = 0; i < common.warmup; ++i) comm.all_reduce(on_stack, on_stack, count, DType::f32, ReduceOp::sum);
      comm.synchronize();
      // The baseline is read before the barrier that starts every rank's clock, so no rank's
      // first bytes fall before it.
      const auto before = reader ? read() : std::map<std::string, LinkCounter>{};
      control.barrier();
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < common.iters; ++i) comm.all_reduce(on_stack, on_stack, count, DType::f32, ReduceOp::sum);
      comm.synchronize();  // a device stack's calls return once queued
      control.barrier();
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (reader) traffic = link_traffic(before, read());
      buffer.copy_to_host(data.data(), buffer.bytes());
    } catch (...) {
      failure = std::current_exception();
    }
    leave_together(control, failure);
    control.all_reduce(&seconds, &seconds, 1, DType::f64, ReduceOp::max);
    // The result: every element of every rank alike (the all_reduce of equal inputs stays equal).
    float lo = data.empty() ? 0 : *std::min_element(data.begin(), data.end());
    float hi = data.empty() ? 0 : *std::max_element(data.begin(), data.end());
    control.all_reduce(&lo, &lo, 1, DType::f32, ReduceOp::min);
    control.all_reduce(&hi, &hi, 1, DType::f32, ReduceOp::max);

    // Per node (its reader): bytes its network links sent, over the rated speed of the links that
    // carried them. An IPoIB interface is left out (its port's counters already hold its bytes),
    // and NVLinks are not links out of the node: they get rows of their own.
    double sent = 0, rated = 0, nv_sent = 0, nv_rated = 0;
    std::string links_used;
    for (const auto& [name, t] : traffic) {
      const double bytes = static_cast<double>(std::max<int64_t>(t.tx_bytes, 0));
      if (name.rfind("nvlink:", 0) == 0) {
        nv_sent += bytes;
        nv_rated += t.rated_bits_per_second;
        continue;
      }
      if (bytes <= 0) continue;
      sent += bytes;
      rated = rated < 0 || t.rated_bits_per_second <= 0 ? -1 : rated + t.rated_bits_per_second;
      links_used += (links_used.empty() ? "" : "+") + name;
    }
    if (rated < 0) rated = 0;  // a link that carried bytes does not say its speed
    if (f.link_speed > 0) rated = f.link_speed;
    double mine[5] = {reader ? 1.0 : 0.0, sent, rated, nv_sent, nv_rated};
    std::vector<double> all(static_cast<size_t>(world) * 5);
    control.all_gather(mine, all.data(), 5, DType::f64);
    std::vector<std::string> links(static_cast<size_t>(world));
    for (int r = 0; r < world; ++r) {
      const std::string text = text_to_root(control, r, links_used);
      if (rank == 0) links[static_cast<size_t>(r)] = text;
    }
    if (rank != 0) return;
    if (!(lo == hi && lo > 0)) {
      throw Error(Error::Kind::mismatch, "link all_reduce: the ranks' results differ (" + format_number(lo) + " .. " +
                                             format_number(hi) + ") where they must all be equal");
    }

    const double per_call = seconds / common.iters;
    const double algbw = static_cast<double>(f.link_bytes) / per_call;
    const double busbw = algbw * (world > 1 ? 2.0 * (world - 1) / world : 0.0);
    double wire_total = 0;
    for (int r = 0; r < world; ++r) {
      const double* v = &all[static_cast<size_t>(r) * 5];
      if (v[0] == 0) continue;
      const double bytes = v[1], speed = v[2];
      wire_total += bytes;
      const std::string node = topo.nodes.names[static_cast<size_t>(r)];
      const std::string used = links[static_cast<size_t>(r)].empty() ? "none" : links[static_cast<size_t>(r)];
      Record u = base_row(c, ctx, "node=" + node + ";link=" + used + ";rated_bits_per_second=" + format_number(speed));
      u.metric = "link_utilization";
      u.unit = "ratio";
      // bytes/s the node put on its links over what they are rated to carry (bits -> bytes).
      u.value = speed > 0 ? bytes / seconds / (speed / 8) : NAN;
      u.detail = format_number(bytes / common.iters) + " bytes per call left node " + node + " through " + used +
                 (speed > 0 ? " in " + format_number(per_call) + " s, rated " + format_number(speed / 1e9) + " Gbit/s"
                            : "; no rated speed: give --link-speed") +
                 (bytes == 0 ? " (nothing crossed a network interface: shared memory inside one node)" : "");
      ctx.emit(u);
      Record claimed = base_row(c, ctx, "node=" + node + ";rated_bits_per_second=" + format_number(speed));
      claimed.metric = "busbw_utilization";
      claimed.unit = "ratio";
      claimed.value = speed > 0 ? busbw / (speed / 8) : NAN;
      claimed.detail = "busbw " + format_number(busbw / 1e9) + " GB/s (what the library's timing claims) over the rated speed";
      ctx.emit(claimed);
      if (v[4] > 0) {  // a node with NVLink: what its GPUs' links carried, over their rated speed
        Record nv = base_row(c, ctx, "node=" + node + ";link=nvlink;rated_bits_per_second=" + format_number(v[4]));
        nv.metric = "link_utilization";
        nv.unit = "ratio";
        nv.value = v[3] / seconds / (v[4] / 8);
        nv.detail = format_number(v[3] / common.iters) + " bytes per call over node " + node + "'s NVLinks";
        ctx.emit(nv);
      }
    }
    Record wire = base_row(c, ctx, "");
    wire.metric = "wire_bytes";
    wire.unit = "bytes";
    wire.value = wire_total / common.iters;
    wire.detail = "bytes per call that left every node through its network interfaces (interface counters)";
    ctx.emit(wire);
    Record bus = base_row(c, ctx, "");
    bus.metric = "busbw";
    bus.unit = "bytes_per_second";
    bus.value = busbw;
    bus.detail = "algbw x 2(n-1)/n over " + std::to_string(common.iters) + " back-to-back calls";
    ctx.emit(bus);
  }

  static Record base_row(const Case& c, RunContext& ctx, const std::string& extra) {
    Record r;
    r.suite = "topology";
    r.case_id = c.id;
    r.labels = c.labels;
    r.labels.config = "job=" + std::to_string(ctx.options().world_size) + (extra.empty() ? "" : ";" + extra);
    r.verdict = Verdict::info;
    return r;
  }

  // The peers case (rank 0; the cells are its): every figure of the matrix judged against its
  // peers by the rule of results/outliers.h, at three levels.
  //   pair  each cell against the other cells of its metric, direction and link class (same-node
  //         or other-node); both ways at once and latency once a pair (its two directions share
  //         one time).
  //   rank  the median of its cells of one class, sent (one-way, as source), received (one-way, as
  //         destination) and latency (either end), against the other ranks of its node: what
  //         every rank of a node shares is the node's, below. The worst rank named is held named
  //         and its cells are left out of the others', which are judged again
  //         (judge_with_partners): a slow rank makes each partner's cell with it slow.
  //   node  the median of the one-way cells its ranks sent to other nodes' ranks, against the
  //         cells the other nodes' ranks sent; received too from three nodes up (with two, the
  //         cells one node receives are those the other sends: the matrix cannot tell a slow
  //         sender from a slow receiver, and the sender is named). With fewer than two such
  //         cells of other nodes (two nodes of one rank), their iterations stand in as peers.
  // On a machine whose ranks outnumber its CPUs (by machine_id: a network namespace is no other
  // machine) the floor is kCrowdedFactor.
  static void run_peers(const Case& c, RunContext& ctx, const std::vector<Cell>& cells) {
    const std::vector<std::string> places =
        all_gather_texts(ctx.control(), machine_id() + " " + allowed_cpus(), 4096);
    if (ctx.control().rank() != 0) return;
    const NodeMap& nodes = ctx.topology().nodes;
    const int world = ctx.control().size();
    const auto node_of = [&](int r) { return nodes.node_of_rank[static_cast<size_t>(r)]; };
    const auto node_name = [&](int r) { return nodes.names[static_cast<size_t>(r)]; };
    const auto rank_text = [&](int r) { return "rank " + std::to_string(r) + " (node " + node_name(r) + ")"; };
    // Machines whose ranks outnumber the CPUs they may use.
    std::vector<std::string> machines, cpus;
    for (const std::string& place : places) {
      const size_t space = place.find(' ');
      machines.push_back(place.substr(0, space));
      cpus.push_back(space == std::string::npos ? "" : place.substr(space + 1));
    }
    const std::vector<CpuSharing> sharing = cpu_sharing(machines, cpus);
    std::vector<bool> crowded(static_cast<size_t>(world), false);
    std::string crowding;
    for (int r = 0; r < world; ++r) {
      const CpuSharing& share = sharing[static_cast<size_t>(r)];
      if (machines[static_cast<size_t>(r)].empty() || share.cpus == 0 || share.ranks <= share.cpus) continue;
      crowded[static_cast<size_t>(r)] = true;
      crowding = std::to_string(share.ranks) + " ranks share " + std::to_string(share.cpus) + " CPUs of one machine";
    }
    const auto floor_of = [&](bool crowd, bool higher_is_better) {
      if (!crowd) return OutlierRule::kMinShortfall;
      return higher_is_better ? 1 - 1 / kCrowdedFactor : kCrowdedLatencyFactor - 1;
    };
    const auto emit = [&](const std::string& metric, const std::string& config, const std::string& who,
                          const std::string& figure, const PeerValue& subject, const OutlierVerdict& v,
                          bool higher_is_better, const std::string& unjudged, bool crowd,
                          const std::string& after = "") {
      Record r;
      r.suite = "topology";
      r.case_id = c.id;
      r.labels = c.labels;
      r.labels.config = config + ";job=" + std::to_string(ctx.options().world_size);
      r.metric = metric;
      r.unit = higher_is_better ? "bytes_per_second" : "seconds";
      const char* unit = higher_is_better ? "B/s" : "s";
      r.value = subject.value;
      r.detail = who + ": " + figure + " " + format_si(subject.value, unit);
      if (v.judged) {
        r.threshold = v.bound;
        r.verdict = v.named ? Verdict::fail : Verdict::pass;
        r.detail += ", " + describe_shortfall(v, higher_is_better, format_si(v.peer_median, unit)) + "; named " +
                    (higher_is_better ? "below " : "above ") + format_si(v.bound, unit) +
                    " (rule: results/outliers.h, noise " + format_si(v.noise, unit) +
                    (crowd ? "; " + crowding + ", so only a factor of " +
                                 format_number(higher_is_better ? kCrowdedFactor : kCrowdedLatencyFactor, "%g") +
                                 " from the peers' median is named"
                           : "") +
                    ")";
      } else {
        r.verdict = Verdict::info;
        r.detail += "; not judged against peers: " + std::to_string(v.peers) + (v.peers == 1 ? " peer" : " peers") +
                    " (" + unjudged + "), the rule needs " + std::to_string(OutlierRule::kMinPeers);
      }
      r.detail += after;
      ctx.emit(r);
    };
    if (cells.empty()) {
      Record r;
      r.suite = "topology";
      r.case_id = c.id;
      r.labels = c.labels;
      r.metric = "check";
      r.verdict = Verdict::skip;
      r.detail = "no cell of the pair matrix was measured in this run, so nothing to judge";
      ctx.emit(r);
      return;
    }
    const auto summary = [](const std::vector<const Cell*>& of) {
      std::vector<double> values, spreads;
      for (const Cell* m : of) values.push_back(m->value), spreads.push_back(m->spread);
      return values.empty() ? PeerValue{} : PeerValue{median_of(values), median_of(spreads)};
    };
    const auto as_peers = [](const std::vector<const Cell*>& of) {
      std::vector<PeerValue> peers;
      for (const Cell* m : of) peers.push_back({m->value, m->spread});
      return peers;
    };
    const auto link_of = [](bool same) { return std::string(same ? "same-node" : "other-node"); };

    // Pairs.
    std::map<std::tuple<std::string, std::string, bool>, std::vector<const Cell*>> groups;
    for (const Cell& cell : cells) {
      if (cell.direction != "one-way" && cell.src > cell.dst) continue;  // both ways, latency: once a pair
      groups[{cell.metric, cell.direction, cell.same_node}].push_back(&cell);
    }
    for (const auto& [key, members] : groups) {
      const auto& [metric, direction, same] = key;
      const bool bandwidth = metric == "p2p_bandwidth";
      const std::string figure_key = !bandwidth ? "latency" : direction == "both" ? "both" : "one-way";
      const std::string figure = !bandwidth ? "latency (half a round trip)"
                                 : direction == "both" ? "bandwidth both ways at once" : "one-way bandwidth";
      bool crowd = false;
      for (const Cell* m : members) crowd = crowd || crowded[static_cast<size_t>(m->src)] || crowded[static_cast<size_t>(m->dst)];
      const auto verdicts = judge_outliers(as_peers(members), bandwidth, floor_of(crowd, bandwidth));
      for (size_t i = 0; i < members.size(); ++i) {
        const Cell& m = *members[i];
        const std::string who = figure_key == "one-way" ? "the path from " + rank_text(m.src) + " to " + rank_text(m.dst)
                                                        : "the pair of " + rank_text(m.src) + " and " + rank_text(m.dst);
        emit(bandwidth ? "pair_bandwidth" : "pair_latency",
             "figure=" + figure_key + ";link=" + link_of(same) + ";src=" + std::to_string(m.src) + ";dst=" +
                 std::to_string(m.dst) + ";src_node=" + node_name(m.src) + ";dst_node=" + node_name(m.dst),
             who, figure, {m.value, m.spread}, verdicts[i], bandwidth,
             "the other " + link_of(same) + " pairs", crowd);
      }
    }

    // Ranks, against the ranks of their node, a rank's cells with partners named before it left
    // out (judge_with_partners: rank 3's one cell with a slow rank 2 and one noisy other would
    // otherwise name it).
    const std::string device = ctx.topology().device;
    const std::vector<std::string> rank_figures = {"send", "receive", "latency"};
    std::vector<int> group(static_cast<size_t>(world));
    std::vector<bool> node_crowded(static_cast<size_t>(nodes.nodes), false);
    for (int r = 0; r < world; ++r) {
      group[static_cast<size_t>(r)] = node_of(r);
      if (crowded[static_cast<size_t>(r)]) node_crowded[static_cast<size_t>(node_of(r))] = true;
    }
    for (const bool same : {true, false}) {
      std::vector<PartnerFigure> figures(rank_figures.size());
      for (size_t f = 0; f < rank_figures.size(); ++f) {
        const bool bandwidth = rank_figures[f] != "latency";
        figures[f].higher_is_better = bandwidth;
        for (int r = 0; r < world; ++r) {
          figures[f].min_shortfall.push_back(floor_of(node_crowded[static_cast<size_t>(node_of(r))], bandwidth));
        }
      }
      for (const Cell& cell : cells) {
        if (cell.same_node != same) continue;
        const PeerValue value{cell.value, cell.spread};
        if (cell.metric == "p2p_bandwidth" && cell.direction == "one-way") {
          figures[0].cells.push_back({cell.src, cell.dst, value});
          figures[1].cells.push_back({cell.dst, cell.src, value});
        } else if (cell.metric == "p2p_latency" && cell.src < cell.dst) {
          figures[2].cells.push_back({cell.src, cell.dst, value});
          figures[2].cells.push_back({cell.dst, cell.src, value});
        }
      }
      const std::vector<std::vector<PartnerVerdict>> judged = judge_with_partners(group, figures);
      for (size_t f = 0; f < rank_figures.size(); ++f) {
        const std::string& figure = rank_figures[f];
        const bool bandwidth = figure != "latency";
        for (int r = 0; r < world; ++r) {
          const PartnerVerdict& v = judged[f][static_cast<size_t>(r)];
          if (!std::isfinite(v.value.value)) continue;
          std::string what = figure == "send" ? "one-way bandwidth sending to " + link_of(same) + " ranks"
                             : figure == "receive" ? "one-way bandwidth receiving from " + link_of(same) + " ranks"
                                                   : "latency to " + link_of(same) + " ranks";
          what += ", the median of its " + std::to_string(v.cells) + (v.cells == 1 ? " cell" : " cells");
          std::string after;
          if (!v.left_out.empty()) {
            std::string with;
            for (size_t i = 0; i < v.left_out.size(); ++i) {
              with += (i == 0 ? "" : i + 1 == v.left_out.size() ? " and " : ", ") + std::to_string(v.left_out[i]);
            }
            after = "; its cells with rank" + std::string(v.left_out.size() == 1 ? " " : "s ") + with +
                    ", named before it, left out (a slow partner's cells say nothing of this rank)";
          }
          emit(bandwidth ? "rank_bandwidth" : "rank_latency",
               "figure=" + figure + ";link=" + link_of(same) + ";rank=" + std::to_string(r) + ";node=" + node_name(r),
               "rank " + std::to_string(r) + " (node " + node_name(r) + ", " + device + ")", what, v.value, v.verdict,
               bandwidth, "the other ranks of node " + node_name(r), node_crowded[static_cast<size_t>(node_of(r))], after);
        }
      }
    }

    // Nodes, against the other nodes' cells.
    if (nodes.nodes < 2) return;
    for (int n = 0; n < nodes.nodes; ++n) {
      const std::vector<int> on = nodes.ranks_on(n);
      std::string ranks;
      for (int r : on) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      const std::string name = node_name(on.front());
      const std::string who = "node " + name + " (rank" + (on.size() == 1 ? " " : "s ") + ranks + ")";
      for (const std::string figure : {"send", "receive"}) {
        if (figure == "receive" && nodes.nodes < 3) continue;
        std::vector<const Cell*> of, others;
        bool crowd = false;
        for (const Cell& cell : cells) {
          if (cell.metric != "p2p_bandwidth" || cell.direction != "one-way" || cell.same_node) continue;
          const int end = node_of(figure == "receive" ? cell.dst : cell.src);
          (end == n ? of : others).push_back(&cell);
          crowd = crowd || crowded[static_cast<size_t>(cell.src)] || crowded[static_cast<size_t>(cell.dst)];
        }
        const PeerValue mine = summary(of);
        if (!std::isfinite(mine.value)) continue;
        std::vector<PeerValue> peers = as_peers(others);
        std::string standing_in;
        if (static_cast<int>(peers.size()) < OutlierRule::kMinPeers) {
          peers.clear();
          for (const Cell* m : others) {
            for (double x : m->samples) peers.push_back({x, 0});
          }
          standing_in = " (" + std::to_string(peers.size()) + " iterations of the other node" +
                        (others.size() == 1 ? "'s one cell" : "s' cells") + " as its peers)";
        }
        const std::string what = figure == "send" ? "one-way bandwidth its ranks sent to other nodes' ranks"
                                                  : "one-way bandwidth its ranks received from other nodes' ranks";
        emit("node_bandwidth", "figure=" + figure + ";link=other-node;node=" + name, who,
             what + ", the median of its " + std::to_string(of.size()) + (of.size() == 1 ? " cell" : " cells") + standing_in,
             mine, judge_against(mine, peers, true, floor_of(crowd, true)), true, "the cells of the other nodes", crowd);
      }
    }
  }

  std::vector<Cell> cells_;  // rank 0's cells of the matrix, for the peers case
};

SuiteInfo topology_info() {
  SuiteInfo info;
  info.name = "topology";
  info.summary = "point-to-point bandwidth and latency of every pair of ranks (same node / other node), and the bytes "
                 "the links carried during an all_reduce (link utilization)";
  info.metrics = {
      {"p2p_bandwidth", "bytes_per_second", "message bytes / time, one way or both ways at once (config src, dst)"},
      {"p2p_latency", "seconds", "half a round trip of a small message"},
      {"link_utilization", "ratio", "bytes a node's links sent during the collective / (time x rated speed)"},
      {"busbw_utilization", "ratio", "the collective's busbw / the rated speed"},
      {"wire_bytes", "bytes", "bytes per call that left the nodes through their interfaces"},
      {"busbw", "bytes_per_second", "busbw of the counted collective"},
      {"pair_bandwidth", "bytes_per_second",
       "a cell of the bandwidth matrix judged against the other cells of its link class (results/outliers.h; "
       "config figure one-way or both, src, dst)"},
      {"pair_latency", "seconds", "a pair's latency judged against the other pairs of its link class"},
      {"rank_bandwidth", "bytes_per_second",
       "the median of a rank's one-way cells of a link class, sent or received (config figure), judged against "
       "the other ranks of its node"},
      {"rank_latency", "seconds", "the median of a rank's latency cells of a link class, against its node's ranks"},
      {"node_bandwidth", "bytes_per_second",
       "the median of the one-way cells a node's ranks sent or received across nodes (config figure send, "
       "receive), judged against the other nodes' cells"},
  };
  info.per_rank_figures = true;
  // A pair's, a rank's and a node's rows of one metric differ in these: N(N - 1) series a metric
  // for N ranks, the matrix's own size.
  info.label_keys = {"figure", "link", "direction", "src", "dst", "rank", "node"};
  PlotSpec bandwidth;
  bandwidth.metric = "p2p_bandwidth";
  bandwidth.x = PlotSpec::X::config;
  bandwidth.x_key = "src";
  bandwidth.y_key = "dst";
  bandwidth.split = "direction";
  bandwidth.exclude = {{"sweep", "1"}};  // the --p2p-sweep sizes: the matrix is one size
  bandwidth.id = "p2p-bandwidth-{split}";
  bandwidth.title = "Point-to-point bandwidth, {split} (GB/s)";
  bandwidth.x_label = "source rank";
  bandwidth.y_label = "destination rank";
  bandwidth.y_scale = 1e9;
  PlotSpec latency = bandwidth;
  latency.metric = "p2p_latency";
  latency.split = "";
  latency.id = "p2p-latency";
  latency.title = "Point-to-point latency (us)";
  latency.y_scale = 1e-6;
  info.sections = {{60, "topology", "Topology",
                    "Point-to-point bandwidth and latency between every pair of ranks through the stack: each "
                    "cell is source (x) to destination (y); the CSV says whether a pair shares a node "
                    "(link=same-node) or not. link_utilization rows compare the bytes the nodes' interfaces "
                    "carried with their rated speed.",
                    "No p2p_bandwidth rows in these results (the topology suite did not run).",
                    {bandwidth, latency}}};
  return info;
}

}  // namespace

DTS_REGISTER_SUITE(TopologySuite, topology_info());

}  // namespace dts

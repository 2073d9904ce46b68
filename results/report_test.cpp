// Unit tests of the report: which plots, series and points a set of records yields (stacks told
// apart, medians over reduction ops, what is left out and said so), the HTML's escaping, and
// gnuplot's SVG made safe to inline several times in one page.
#include "results/report.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <tuple>

#include "core/error.h"
#include "results/catalog.h"
#include "results/compare.h"

namespace dts {
namespace {

namespace fs = std::filesystem;

// Where the collectives suite's latency plots stop, as its catalog entry declares it.
int64_t latency_max_bytes() {
  for (const SuiteInfo& info : suite_catalog()) {
    for (const SectionSpec& section : info.sections) {
      if (section.id == "latency") return section.plots.at(0).max_bytes;
    }
  }
  return -1;
}

Record stamped(const std::string& backend, int world_size) {
  Record r;
  r.run_id = "run-" + backend;
  r.labels.backend = backend;
  r.labels.device = "cpu:Test CPU";
  r.labels.world_size = world_size;
  r.labels.nodes = 1;
  return r;
}

Record collective(const std::string& backend, const std::string& metric, const std::string& op, const std::string& dtype,
                  int64_t bytes, double value, const std::string& redop = "sum",
                  const std::string& placement = "out_of_place") {
  Record r = stamped(backend, 2);
  r.suite = "collectives";
  r.case_id = op + "/" + dtype + "/" + redop + "/" + std::to_string(bytes);
  r.metric = metric;
  r.labels.op = op;
  r.labels.dtype = dtype;
  r.labels.bytes = bytes;
  r.labels.placement = placement;
  r.labels.config = "redop=" + redop + ";root=-1";
  r.value = value;
  return r;
}

Record equivalence(const std::string& backend, const std::string& strategy, const std::string& dtype, int dp,
                   double error, double bound) {
  Record r = stamped(backend, 3);
  r.suite = "equivalence";
  r.case_id = strategy + "/" + dtype + "/dp" + std::to_string(dp);
  r.metric = "max_abs_error";
  r.labels.strategy = strategy;
  r.labels.dtype = dtype;
  r.labels.config = "dp=" + std::to_string(dp) + ";zero=0";
  r.value = error;
  r.verdict = Verdict::pass;
  r.threshold = bound;
  return r;
}

const ReportSection& section(const ReportData& data, const std::string& id) {
  for (const auto& s : data.sections) {
    if (s.id == id) return s;
  }
  throw std::runtime_error("no section " + id);
}

const Plot* find_plot(const ReportData& data, const std::string& id) {
  for (const auto& s : data.sections) {
    for (const auto& p : s.plots) {
      if (p.id == id) return &p;
    }
  }
  return nullptr;
}

TEST(Grouping, BusbwPerCollectiveWithOneSeriesPerStackAndTheMedianOverReductionOps) {
  ResultsFile a{"dir/a.csv", {}}, b{"dir/b.csv", {}};
  // Three reduction ops at 1 KiB: 1, 2 and 6 GB/s -> median 2 GB/s.
  a.records.push_back(collective("mpi", "busbw", "all_reduce", "f32", 1024, 1e9, "sum"));
  a.records.push_back(collective("mpi", "busbw", "all_reduce", "f32", 1024, 6e9, "max"));
  a.records.push_back(collective("mpi", "busbw", "all_reduce", "f32", 1024, 2e9, "min"));
  a.records.push_back(collective("mpi", "busbw", "all_reduce", "f32", 8, 0.5e9));
  a.records.push_back(collective("mpi", "busbw", "all_reduce", "f32", 1024, 9e9, "sum", "in_place"));  // not drawn
  a.records.push_back(collective("mpi", "busbw", "all_reduce", "f32", 0, 0));                         // noted
  Record skipped = collective("mpi", "busbw", "all_reduce", "f32", 4096, 0);
  skipped.verdict = Verdict::skip;
  a.records.push_back(skipped);
  b.records.push_back(collective("ring(mpi)", "busbw", "all_reduce", "f32", 1024, 3e9));
  b.records.push_back(collective("ring(mpi)", "busbw", "all_gather", "f32", 1024, 3e9));

  const ReportData data = group_results({a, b});
  ASSERT_EQ(data.stacks.size(), 2u);
  EXPECT_EQ(data.stacks[0].label, "mpi | cpu:Test CPU | 2 ranks");
  EXPECT_EQ(data.stacks[1].label, "ring(mpi) | cpu:Test CPU | 2 ranks");
  const ReportSection& bandwidth = section(data, "bandwidth");
  ASSERT_EQ(bandwidth.plots.size(), 2u);  // all_reduce and all_gather, in the suite's order
  EXPECT_EQ(bandwidth.plots[0].id, "busbw-all_reduce");
  EXPECT_EQ(bandwidth.plots[1].id, "busbw-all_gather");
  const Plot& p = bandwidth.plots[0];
  EXPECT_TRUE(p.log_x);
  EXPECT_EQ(p.y_scale, 1e9);
  ASSERT_EQ(p.series.size(), 2u);
  EXPECT_EQ(p.series[0].stack, 0);
  EXPECT_EQ(p.series[0].label, "mpi | cpu:Test CPU | 2 ranks | f32");
  ASSERT_EQ(p.series[0].points.size(), 2u);
  EXPECT_EQ(p.series[0].points[0].x, 8);
  EXPECT_EQ(p.series[0].points[0].y, 0.5e9);
  EXPECT_EQ(p.series[0].points[1].x, 1024);
  EXPECT_EQ(p.series[0].points[1].y, 2e9);  // the median of 1, 2, 6 (the in-place 9 left out)
  EXPECT_EQ(p.series[1].stack, 1);
  EXPECT_NE(p.note.find("1 record of 0 bytes"), std::string::npos) << p.note;
  EXPECT_TRUE(bandwidth.empty_note.empty());
}

TEST(Grouping, BandwidthSpanningMoreThanAHundredfoldGetsALogAxis) {
  ResultsFile a{"a.csv", {}};
  a.records.push_back(collective("mpi", "busbw", "all_reduce", "f32", 8, 1e6));
  a.records.push_back(collective("mpi", "busbw", "all_reduce", "f32", 1024, 1e8));  // exactly 100x: linear
  a.records.push_back(collective("mpi", "busbw", "all_gather", "f32", 8, 1e6));
  a.records.push_back(collective("mpi", "busbw", "all_gather", "f32", 1024, 1.01e8));  // past 100x: log
  const ReportData data = group_results({a});
  EXPECT_FALSE(find_plot(data, "busbw-all_reduce")->log_y);
  EXPECT_TRUE(find_plot(data, "busbw-all_gather")->log_y);
}

TEST(Grouping, DtypesAreVariantsOfAStack) {
  ResultsFile a{"a.csv", {}};
  a.records.push_back(collective("mpi", "busbw", "all_reduce", "f32", 1024, 1e9));
  a.records.push_back(collective("mpi", "busbw", "all_reduce", "bf16", 1024, 1e9));
  const ReportData data = group_results({a});
  const Plot* p = find_plot(data, "busbw-all_reduce");
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->series.size(), 2u);
  std::set<int> variants{p->series[0].variant, p->series[1].variant};
  EXPECT_EQ(variants.size(), 2u);  // drawn with different dashes and points
  EXPECT_EQ(p->series[0].stack, p->series[1].stack);  // in the same colour
}

TEST(Grouping, TheSameStackInTwoFilesIsToldApartByFileName) {
  ResultsFile a{"x/monday.csv", {collective("mpi", "busbw", "all_reduce", "f32", 8, 1)}};
  ResultsFile b{"x/tuesday.csv", {collective("mpi", "busbw", "all_reduce", "f32", 8, 2)}};
  const ReportData data = group_results({a, b});
  ASSERT_EQ(data.stacks.size(), 2u);
  EXPECT_EQ(data.stacks[0].label, "mpi | cpu:Test CPU | 2 ranks | monday.csv");
  EXPECT_EQ(data.stacks[1].label, "mpi | cpu:Test CPU | 2 ranks | tuesday.csv");
}

// One build against Open MPI, one against MPICH (the same backend, device and ranks): told apart
// by the library, in short, not by the file's name.
TEST(Grouping, TheSameBackendOnTwoMpiLibrariesIsToldApartByTheLibrary) {
  Record open_mpi = collective("mpi", "busbw", "all_reduce", "f32", 8, 1);
  open_mpi.labels.mpi_version = "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4";
  Record mpich = collective("mpi", "busbw", "all_reduce", "f32", 8, 2);
  mpich.labels.mpi_version = "MPICH Version:      4.0.2\nMPICH Release date: Thu Mar 17 2022";
  const ReportData data = group_results({{"x/openmpi.csv", {open_mpi}}, {"x/mpich.csv", {mpich}}});
  ASSERT_EQ(data.stacks.size(), 2u);
  EXPECT_EQ(data.stacks[0].label, "mpi | cpu:Test CPU | 2 ranks | Open MPI v4.1.4");
  EXPECT_EQ(data.stacks[1].label, "mpi | cpu:Test CPU | 2 ranks | MPICH 4.0.2");
}

TEST(Grouping, LatencyKeepsOnlySmallSizes) {
  ResultsFile a{"a.csv", {}};
  const int64_t latency_bytes = latency_max_bytes();
  ASSERT_GT(latency_bytes, 0);
  a.records.push_back(collective("mpi", "time", "broadcast", "f32", latency_bytes, 2e-5));
  a.records.push_back(collective("mpi", "time", "broadcast", "f32", latency_bytes + 1, 3e-5));
  const ReportData data = group_results({a});
  const Plot* p = find_plot(data, "latency-broadcast");
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->series.size(), 1u);
  ASSERT_EQ(p->series[0].points.size(), 1u);  // the size at the limit is in, one byte more is out
  EXPECT_EQ(p->series[0].points[0].x, static_cast<double>(latency_bytes));
  EXPECT_EQ(p->y_scale, 1e-6);  // seconds drawn as microseconds
}

TEST(Grouping, EquivalencePerDtypeWithTheBoundAndExactZerosCounted) {
  ResultsFile a{"a.csv", {}};
  a.records.push_back(equivalence("mpi", "ddp", "f32", 1, 0.0, 1e-4));  // exact: log axis can't show it
  a.records.push_back(equivalence("mpi", "ddp", "f32", 2, 1e-8, 1e-4));
  a.records.push_back(equivalence("mpi", "zero1", "f32", 2, 2e-8, 1e-4));
  a.records.push_back(equivalence("mpi", "ddp", "f64", 3, 1e-17, 1e-12));
  const ReportData data = group_results({a});
  const ReportSection& eq = section(data, "equivalence");
  ASSERT_EQ(eq.plots.size(), 2u);  // f32 and f64
  const Plot& f32 = eq.plots[0];
  EXPECT_EQ(f32.id, "equivalence-f32");
  EXPECT_TRUE(f32.log_y);
  ASSERT_EQ(f32.series.size(), 3u);  // ddp, zero1, and the bound
  EXPECT_EQ(f32.series[0].label, "mpi | cpu:Test CPU | 3 ranks | ddp");
  ASSERT_EQ(f32.series[0].points.size(), 1u);
  EXPECT_EQ(f32.series[0].points[0].x, 2);  // a row without job=: the dp= of the config, not world_size
  EXPECT_EQ(f32.series[2].stack, -1);  // the threshold, drawn where drawn cases carry one
  ASSERT_EQ(f32.series[2].points.size(), 1u);
  EXPECT_EQ(f32.series[2].points[0].x, 2);
  EXPECT_EQ(f32.series[2].points[0].y, 1e-4);
  EXPECT_NE(f32.note.find("1 record equal to 0 (exact)"), std::string::npos) << f32.note;
}

TEST(Grouping, SubWorldRowsAreOneStackWithTheirJob) {
  // A 4-rank job: collectives rows on every rank (world_size 4) and equivalence and scaling rows
  // on sub-worlds of 1..4 ranks (world_size 1..4, job=4 in config). One stack, named by the job;
  // the plots about ranks still place each row at its own sub-world's size.
  ResultsFile a{"a.csv", {}};
  Record bandwidth = collective("mpi", "busbw", "all_reduce", "f32", 1024, 1e9);
  bandwidth.labels.world_size = 4;
  a.records.push_back(bandwidth);
  for (int w = 1; w <= 4; ++w) {
    Record eq = equivalence("mpi", "ddp", "f32", w, 1e-8 * w, 1e-4);
    eq.labels.world_size = w;
    eq.labels.config = "dp=" + std::to_string(w) + ";zero=0;job=4";
    a.records.push_back(eq);
    // A tp layout of w ranks: dp=1, and the plot must place it at w, the ranks that took part.
    Record tp = equivalence("mpi", "tp", "f32", 1, 1e-8 * w, 1e-4);
    tp.labels.world_size = w;
    tp.labels.config = "dp=1;tp=" + std::to_string(w) + ";pp=1;zero=0;job=4";
    a.records.push_back(tp);
    Record scaling = stamped("mpi", w);
    scaling.suite = "scaling";
    scaling.metric = "scaling_efficiency";
    scaling.labels.strategy = "tp";
    scaling.labels.config = "tp=" + std::to_string(w) + ";job=4;mode=weak";  // no dp=: x is the row's world_size
    scaling.value = 1.0 / w;
    a.records.push_back(scaling);
  }
  const ReportData data = group_results({a});
  ASSERT_EQ(data.stacks.size(), 1u);
  EXPECT_EQ(data.stacks[0].world_size, 4);
  EXPECT_EQ(data.stacks[0].label, "mpi | cpu:Test CPU | 4 ranks");
  ASSERT_EQ(data.verdicts.size(), 3u);  // collectives, equivalence, scaling: all of stack 0
  for (const VerdictCounts& c : data.verdicts) EXPECT_EQ(c.stack, 0) << c.suite;
  for (const char* id : {"busbw-all_reduce", "equivalence-f32", "scaling-weak"}) {
    const Plot* p = find_plot(data, id);
    ASSERT_NE(p, nullptr) << id;
    EXPECT_EQ(p->series.front().stack, 0) << id;
    EXPECT_EQ(p->series.front().label.rfind("mpi | cpu:Test CPU | 4 ranks", 0), 0u) << p->series.front().label;
  }
  const Plot* eq = find_plot(data, "equivalence-f32");
  ASSERT_EQ(eq->series.size(), 3u);  // ddp, tp, and the bound
  for (size_t s = 0; s < 2; ++s) {
    ASSERT_EQ(eq->series[s].points.size(), 4u) << eq->series[s].label;
    for (int w = 1; w <= 4; ++w) EXPECT_EQ(eq->series[s].points[static_cast<size_t>(w - 1)].x, w) << eq->series[s].label;
  }
  const Plot* scaling = find_plot(data, "scaling-weak");
  ASSERT_EQ(scaling->series.size(), 1u);
  ASSERT_EQ(scaling->series[0].points.size(), 4u);
  EXPECT_EQ(scaling->series[0].points[3].x, 4);
  EXPECT_EQ(scaling->series[0].points[3].y, 0.25);
}

TEST(Grouping, OptimizersAreVariantsAndDifferingThresholdsAreNotDrawn) {
  ResultsFile a{"a.csv", {}};
  Record sgd = equivalence("mpi", "ddp", "f32", 2, 1e-8, 1e-6);
  sgd.labels.config += ";optimizer=sgd";
  Record adamw = equivalence("mpi", "ddp", "f32", 2, 1e-5, 1e-2);
  adamw.labels.config += ";optimizer=adamw";
  a.records = {sgd, adamw};
  const ReportData data = group_results({a});
  const Plot* p = find_plot(data, "equivalence-f32");
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->series.size(), 2u);  // ddp/adamw and ddp/sgd; no threshold line
  EXPECT_EQ(p->series[0].label, "mpi | cpu:Test CPU | 3 ranks | ddp/adamw");
  EXPECT_EQ(p->series[1].label, "mpi | cpu:Test CPU | 3 ranks | ddp/sgd");
  EXPECT_NE(p->note.find("thresholds differ"), std::string::npos) << p->note;
}

TEST(Grouping, SectionsWithoutRowsSaySo) {
  ResultsFile a{"a.csv", {collective("mpi", "busbw", "all_reduce", "f32", 8, 1)}};
  const ReportData data = group_results({a});
  EXPECT_TRUE(section(data, "scaling").plots.empty());
  EXPECT_NE(section(data, "scaling").empty_note.find("No scaling_efficiency rows"), std::string::npos);
  EXPECT_FALSE(section(data, "convergence").empty_note.empty());
  EXPECT_FALSE(section(data, "equivalence").empty_note.empty());
}

TEST(Grouping, ScalingAndConvergenceRowsArePlotted) {
  ResultsFile a{"a.csv", {}};
  for (int n : {1, 2, 4}) {
    Record r = stamped("mpi", 4);
    r.suite = "scaling";
    r.metric = "scaling_efficiency";
    r.labels.strategy = "ddp";
    r.labels.config = "dp=" + std::to_string(n) + ";mode=strong";
    r.value = 1.0 / n;
    a.records.push_back(r);
  }
  for (int epoch : {0, 1, 2}) {
    Record r = stamped("mpi", 4);
    r.suite = "convergence";
    r.metric = "loss";
    r.labels.strategy = "ddp";
    r.labels.config = "epoch=" + std::to_string(epoch);
    r.value = 2.0 - epoch;
    a.records.push_back(r);
  }
  const ReportData data = group_results({a});
  const Plot* scaling = find_plot(data, "scaling-strong");
  ASSERT_NE(scaling, nullptr);
  ASSERT_EQ(scaling->series.size(), 1u);
  EXPECT_EQ(scaling->series[0].points.size(), 3u);
  EXPECT_EQ(scaling->series[0].points[2].x, 4);
  const Plot* loss = find_plot(data, "convergence-loss");
  ASSERT_NE(loss, nullptr);
  EXPECT_EQ(loss->series[0].points.back().y, 0.0);  // epoch 2: 2 - 2
}

TEST(Grouping, ASuiteDrawsTheSectionItRegisters) {
  // A suite known only by its catalog entry: the report draws its section with no change of its own.
  SuiteInfo info;
  info.name = "test-suite";
  PlotSpec spec;
  spec.metric = "widgets";
  spec.x = PlotSpec::X::config;
  spec.x_key = "round";
  spec.split = "dtype";
  spec.series = {"flavour"};
  spec.id = "widgets-{split}";
  spec.title = "Widgets ({split})";
  info.sections = {{1000, "widgets", "Widgets", "Widgets per round.", "No widgets.", {spec}}};
  register_suite_info(info);
  ResultsFile a{"a.csv", {}};
  for (int round : {1, 2}) {
    for (const char* flavour : {"sweet", "sour"}) {
      Record r = stamped("mpi", 2);
      r.suite = "test-suite";
      r.metric = "widgets";
      r.labels.dtype = "f64";
      r.labels.config = std::string("round=") + std::to_string(round) + ";flavour=" + flavour;
      r.value = round * 10;
      a.records.push_back(r);
    }
  }
  Record unrelated = a.records.front();
  unrelated.suite = "another";  // same metric, another suite: not drawn here
  a.records.push_back(unrelated);
  const ReportData data = group_results({a});
  EXPECT_EQ(data.sections.back().id, "widgets");  // order 1000: after every real suite's
  const Plot* p = find_plot(data, "widgets-f64");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->title, "Widgets (f64)");
  ASSERT_EQ(p->series.size(), 2u);  // sour and sweet
  EXPECT_EQ(p->series[0].label, "mpi | cpu:Test CPU | 2 ranks | sour");
  ASSERT_EQ(p->series[0].points.size(), 2u);
  EXPECT_EQ(p->series[0].points[1].x, 2);
  EXPECT_EQ(p->series[0].points[1].y, 20);
}

TEST(Grouping, AMeasurementAgainstItsPredictionIsAScatterWithTheDiagonal) {
  // x from the same case's record of another metric (the planner's prediction), scaled as y is.
  SuiteInfo info;
  info.name = "test-predictions";
  PlotSpec spec;
  spec.metric = "measured";
  spec.x = PlotSpec::X::metric;
  spec.x_metric = "predicted";
  spec.x_scale = 1e-3;
  spec.y_scale = 1e-3;
  spec.diagonal = true;
  spec.x_label = "predicted";
  spec.id = "predicted-vs-measured";
  info.sections = {{1001, "predictions", "Predictions", "", "None.", {spec}}};
  register_suite_info(info);
  ResultsFile a{"a.csv", {}};
  for (const auto& [id, predicted, measured] : {std::tuple{"one", 2e-3, 3e-3}, {"two", 5e-3, 4e-3}}) {
    for (const auto& [metric, value] : {std::pair{"predicted", predicted}, {"measured", measured}}) {
      Record r = stamped("mpi", 2);
      r.suite = "test-predictions";
      r.case_id = id;
      r.metric = metric;
      r.value = value;
      a.records.push_back(r);
    }
  }
  Record lone = a.records.back();  // measured without a prediction: not drawn, said in the note
  lone.case_id = "three";
  a.records.push_back(lone);
  const ReportData data = group_results({a});
  const Plot* p = find_plot(data, "predicted-vs-measured");
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->series.size(), 1u);
  ASSERT_EQ(p->series[0].points.size(), 2u);
  EXPECT_EQ(p->series[0].points[0].x, 2e-3);  // by x: "one" first
  EXPECT_EQ(p->series[0].points[0].y, 3e-3);
  EXPECT_TRUE(p->diagonal);
  EXPECT_EQ(p->note, "1 record without the x value (predicted) are not drawn.") << p->note;
  const std::string script = gnuplot_script(*p);
  EXPECT_NE(script.find("\n2 3\n"), std::string::npos) << script;  // both axes in ms
  EXPECT_NE(script.find("x with lines"), std::string::npos) << script;
  EXPECT_NE(script.find("with points"), std::string::npos) << script;
}

TEST(Grouping, APairMatrixIsAHeatMapWithTheMedianOfEachCell) {
  ResultsFile a{"a.csv", {}};
  for (const auto& [src, dst, value] : {std::tuple{0, 1, 2e9}, {1, 0, 4e9}, {1, 0, 6e9}, {0, 2, 1e9}}) {
    Record r = stamped("mpi", 3);
    r.suite = "topology";
    r.metric = "p2p_bandwidth";
    r.labels.config = "src=" + std::to_string(src) + ";dst=" + std::to_string(dst) + ";direction=one-way";
    r.value = value;
    a.records.push_back(r);
  }
  const ReportData data = group_results({a});
  const Plot* p = find_plot(data, "p2p-bandwidth-one-way");
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(p->series.empty());
  ASSERT_EQ(p->cells.size(), 3u);  // (0,1), (0,2), (1,0); no rank sends to itself
  const auto cell = [&](double x, double y) {
    for (const HeatCell& c : p->cells) {
      if (c.x == x && c.y == y) return c.z;
    }
    return -1.0;
  };
  EXPECT_EQ(cell(1, 0), 5e9);  // the median of 4e9 and 6e9
  EXPECT_EQ(cell(0, 2), 1e9);
  const std::string script = gnuplot_script(*p);
  EXPECT_NE(script.find("with boxxyerror fc palette"), std::string::npos) << script;
  EXPECT_NE(script.find("1 0 5\n"), std::string::npos) << script;  // GB/s: y_scale 1e9
}

TEST(Grouping, VerdictsAreCountedPerStackAndSuiteAndFailuresListed) {
  ResultsFile a{"a.csv", {}};
  a.records.push_back(collective("mpi", "busbw", "all_reduce", "f32", 8, 1));  // info
  Record wrong = collective("mpi", "wrong", "all_reduce", "f32", 8, 3);
  wrong.verdict = Verdict::fail;
  wrong.detail = "3 wrong <elements>";
  a.records.push_back(wrong);
  const ReportData data = group_results({a});
  ASSERT_EQ(data.verdicts.size(), 1u);
  EXPECT_EQ(data.verdicts[0].suite, "collectives");
  EXPECT_EQ(data.verdicts[0].by_verdict.at("info"), 1);
  EXPECT_EQ(data.verdicts[0].by_verdict.at("fail"), 1);
  ASSERT_EQ(data.failures.size(), 1u);
  EXPECT_EQ(data.failures[0].second.detail, "3 wrong <elements>");
}

TEST(Grouping, AKnownDeviationIsCountedApartAndAStaleExpectationIsAFailure) {
  ResultsFile a{"a.csv", {}};
  Record known = collective("mpi", "wrong", "all_reduce", "i8", 64, 6);
  known.verdict = Verdict::xfail;
  known.detail = "expected: openmpi-4.1.toml #4 (cited) | overflow inputs: 6 wrong";
  a.records.push_back(known);
  Record stale;
  stale.suite = "expect";
  stale.case_id = "openmpi-4.1.toml#7";
  stale.metric = "check";
  stale.labels = known.labels;
  stale.verdict = Verdict::xpass;
  stale.detail = "XPASS: none of the 48 rows it selects shows saturates at 255";
  a.records.push_back(stale);
  const ReportData data = group_results({a});
  int64_t xfail = 0, xpass = 0;
  for (const VerdictCounts& c : data.verdicts) {
    if (c.by_verdict.count("xfail")) xfail += c.by_verdict.at("xfail");
    if (c.by_verdict.count("xpass")) xpass += c.by_verdict.at("xpass");
  }
  EXPECT_EQ(xfail, 1);
  EXPECT_EQ(xpass, 1);
  ASSERT_EQ(data.failures.size(), 1u);  // the stale expectation, not the known deviation
  EXPECT_EQ(data.failures[0].second.suite, "expect");
  const std::string html = render_html(data, {});
  EXPECT_NE(html.find("<th>xpass</th><th>xfail</th>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"n xfail\">1</td>"), std::string::npos);
}

// A judged record of the collectives suite: `wrong` with a verdict and a detail.
Record judged(const std::string& backend, const std::string& case_op, Verdict verdict, const std::string& detail,
              const std::string& placement = "out_of_place") {
  Record r = collective(backend, "wrong", case_op, "f32", 8, verdict == Verdict::pass ? 0 : 1, "max", placement);
  r.verdict = verdict;
  r.detail = detail;
  return r;
}

TEST(CrossStack, CasesWhoseVerdictOrFailureDiffersAreListedPerStack) {
  ResultsFile mpi{"mpi.csv", {}}, ring{"ring.csv", {}};
  // all_reduce: fails on mpi (its worst record), passes on ring: listed.
  mpi.records.push_back(judged("mpi", "all_reduce", Verdict::pass, "0 wrong", "in_place"));
  mpi.records.push_back(judged("mpi", "all_reduce", Verdict::fail, "NaN dropped by max: 4"));
  ring.records.push_back(judged("ring(mpi)", "all_reduce", Verdict::pass, "0 wrong"));
  // reduce: passes on both with other numbers in the detail: not a difference.
  mpi.records.push_back(judged("mpi", "reduce", Verdict::pass, "max_ulp 0.5"));
  ring.records.push_back(judged("ring(mpi)", "reduce", Verdict::pass, "max_ulp 0.25"));
  // broadcast: fails on both for different reasons: listed; all_gather: alike on both: not.
  mpi.records.push_back(judged("mpi", "broadcast", Verdict::fail, "saturates at 127: 2"));
  ring.records.push_back(judged("ring(mpi)", "broadcast", Verdict::fail, "wrong value: 2"));
  mpi.records.push_back(judged("mpi", "all_gather", Verdict::fail, "wrong value: 1"));
  ring.records.push_back(judged("ring(mpi)", "all_gather", Verdict::fail, "wrong value: 1"));
  // send_recv: skipped on one (its one check record), passing on the other: listed.
  Record skipped = stamped("mpi", 2);
  skipped.suite = "collectives";
  skipped.case_id = collective("mpi", "wrong", "send_recv", "f32", 8, 0, "max").case_id;
  skipped.metric = "check";
  skipped.verdict = Verdict::skip;
  skipped.detail = "backend mpi has no f8e4m3";
  mpi.records.push_back(skipped);
  ring.records.push_back(judged("ring(mpi)", "send_recv", Verdict::pass, "0 wrong"));
  // all_to_all: run on one stack only: compared with nothing.
  mpi.records.push_back(judged("mpi", "all_to_all", Verdict::fail, "wrong value: 9"));
  // info records (timings) are not outcomes.
  mpi.records.push_back(collective("mpi", "busbw", "reduce_scatter", "f32", 8, 1, "max"));
  ring.records.push_back(collective("ring(mpi)", "busbw", "reduce_scatter", "f32", 8, 2, "max"));

  const ReportData data = group_results({mpi, ring});
  ASSERT_EQ(data.cross_stacks, (std::vector<int>{0, 1}));
  ASSERT_EQ(data.cross_stack.size(), 3u);
  const CrossStackRow& all_reduce = data.cross_stack[0];
  EXPECT_EQ(all_reduce.suite, "collectives");
  EXPECT_EQ(all_reduce.case_id, "all_reduce/f32/max/8");
  EXPECT_EQ(all_reduce.outcomes[0].verdict, "fail");
  EXPECT_EQ(all_reduce.outcomes[0].detail, "wrong out_of_place: NaN dropped by max: 4");
  EXPECT_EQ(all_reduce.outcomes[1].verdict, "pass");
  EXPECT_EQ(data.cross_stack[1].case_id, "broadcast/f32/max/8");
  EXPECT_EQ(data.cross_stack[1].outcomes[1].detail, "wrong out_of_place: wrong value: 2");
  EXPECT_EQ(data.cross_stack[2].case_id, "send_recv/f32/max/8");
  EXPECT_EQ(data.cross_stack[2].outcomes[0].verdict, "skip");
  EXPECT_EQ(data.cross_stack[2].outcomes[0].detail, "check: backend mpi has no f8e4m3");

  const std::string html = render_html(data, [](const Plot&) { return std::string("<svg></svg>"); });
  const size_t table = html.find("<h2 id=\"cross-stack\">");
  ASSERT_NE(table, std::string::npos);
  EXPECT_NE(html.find("<td class=\"fail\">fail<div class=\"detail\">wrong out_of_place: NaN dropped by max: 4</div>",
                      table),
            std::string::npos);
  EXPECT_NE(html.find("<th>ring(mpi) | cpu:Test CPU | 2 ranks</th>", table), std::string::npos);
}

TEST(CrossStack, OneStackHasNoTableAndAlikeStacksSaySo) {
  ResultsFile one{"one.csv", {judged("mpi", "all_reduce", Verdict::fail, "x")}};
  const ReportData alone = group_results({one});
  EXPECT_TRUE(alone.cross_stack.empty());
  const auto stub = [](const Plot&) { return std::string(); };
  EXPECT_EQ(render_html(alone, stub).find("cross-stack"), std::string::npos);
  ResultsFile other{"other.csv", {judged("ring(mpi)", "all_reduce", Verdict::fail, "x")}};
  const ReportData alike = group_results({one, other});
  EXPECT_TRUE(alike.cross_stack.empty());
  EXPECT_NE(render_html(alike, stub).find("No case differs between the stacks."), std::string::npos);
}

// The conformance matrix: per collective and dtype, each reduction op's worst verdict per stack
// over sizes and placements; a passing size does not hide a failing one, an info record (a
// timing) is no verdict, an op one stack did not run is missing from its cell only.
TEST(Conformance, EachOpsWorstVerdictPerStackAndDtype) {
  ResultsFile mpi{"mpi.csv", {}}, gloo{"gloo.csv", {}};
  auto judged_at = [](const std::string& backend, const std::string& op, const std::string& dtype, int64_t count,
                      const std::string& redop, Verdict verdict) {
    Record r = collective(backend, "wrong", op, dtype, count, verdict == Verdict::pass ? 0 : 1, redop);
    r.verdict = verdict;
    return r;
  };
  mpi.records.push_back(judged_at("mpi", "all_reduce", "f32", 8, "sum", Verdict::pass));
  mpi.records.push_back(judged_at("mpi", "all_reduce", "f32", 8, "max", Verdict::pass));
  mpi.records.push_back(judged_at("mpi", "all_reduce", "f32", 64, "max", Verdict::xfail));  // the worst of max
  mpi.records.push_back(judged_at("mpi", "all_reduce", "bf16", 8, "avg", Verdict::pass));
  gloo.records.push_back(judged_at("gloo", "all_reduce", "f32", 8, "sum", Verdict::pass));
  gloo.records.push_back(judged_at("gloo", "all_reduce", "f32", 8, "max", Verdict::fail));
  gloo.records.push_back(judged_at("gloo", "all_reduce", "f32", 64, "max", Verdict::pass));
  gloo.records.push_back(judged_at("gloo", "all_reduce", "bf16", 8, "sum", Verdict::skip));
  gloo.records.push_back(collective("gloo", "busbw", "all_reduce", "f32", 8, 1, "prod"));  // info: no verdict
  mpi.records.push_back(judged_at("mpi", "broadcast", "f32", 8, "none", Verdict::pass));  // data movement
  const ReportData data = group_results({mpi, gloo});
  ASSERT_EQ(data.conformance_stacks, (std::vector<int>{0, 1}));
  ASSERT_EQ(data.conformance.size(), 3u);
  const ConformanceRow& f32 = data.conformance[0];
  EXPECT_EQ(f32.collective, "all_reduce");
  EXPECT_EQ(f32.dtype, "f32");
  using Cell = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(f32.cells[0], (Cell{{"sum", "pass"}, {"max", "xfail"}}));
  EXPECT_EQ(f32.cells[1], (Cell{{"sum", "pass"}, {"max", "fail"}}));
  const ConformanceRow& bf16 = data.conformance[1];
  EXPECT_EQ(bf16.cells[0], (Cell{{"avg", "pass"}}));
  EXPECT_EQ(bf16.cells[1], (Cell{{"sum", "skip"}}));
  EXPECT_EQ(data.conformance[2].collective, "broadcast");
  EXPECT_EQ(data.conformance[2].cells[0], (Cell{{"none", "pass"}}));
  EXPECT_TRUE(data.conformance[2].cells[1].empty());  // gloo ran no broadcast
  const std::string html = render_html(data, [](const Plot&) { return std::string("<svg></svg>"); });
  const size_t table = html.find("<h2 id=\"conformance\">");
  ASSERT_NE(table, std::string::npos);
  EXPECT_NE(html.find("<span class=\"v fail\" title=\"fail\">max</span>", table), std::string::npos);
  EXPECT_NE(html.find("<th>gloo | cpu:Test CPU | 2 ranks</th>", table), std::string::npos);
  // One stack: no matrix (nothing to set beside it).
  EXPECT_TRUE(group_results({gloo}).conformance.empty());
}

TEST(Html, EveryTextFromTheCsvIsEscaped) {
  EXPECT_EQ(escape_html("<a href=\"x\">'&'</a>"), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  // Control bytes (an escape sequence, a NUL) and bytes that are not UTF-8 become U+FFFD; valid
  // UTF-8 and line breaks stay.
  EXPECT_EQ(escape_html(std::string("a\x1b[2Jb\0c", 8)), "a\xEF\xBF\xBD[2Jb\xEF\xBF\xBD" "c");
  EXPECT_EQ(escape_html("caf\xC3\xA9 \xE2\x82\xAC\n"), "caf\xC3\xA9 \xE2\x82\xAC\n");
  EXPECT_EQ(escape_html("\xFF\xC3(\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD(\xEF\xBF\xBD\xEF\xBF\xBD");  // bad lead, cut, overlong
  ResultsFile a{"<evil>.csv", {}};
  Record r = collective("<script>alert(1)</script>", "wrong", "all_reduce", "f32", 8, 1);
  r.verdict = Verdict::fail;
  r.detail = "<img src=x onerror=alert(1)>";
  a.records.push_back(r);
  a.records.push_back(collective("<script>alert(1)</script>", "busbw", "all_reduce", "f32", 8, 1));
  const ReportData data = group_results({a});
  int rendered = 0;
  const std::string html = render_html(data, [&](const Plot&) {
    ++rendered;
    return std::string("<svg></svg>");
  });
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<evil>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;"), std::string::npos);
  // One figure per plot, each with what the renderer returned.
  EXPECT_EQ(rendered, 1);
  size_t figures = 0;
  for (size_t at = html.find("<figure"); at != std::string::npos; at = html.find("<figure", at + 1)) ++figures;
  EXPECT_EQ(figures, 1u);
}

TEST(Html, TheInventoryIsATableWithTheRanksAFailedCheckNamesMarked) {
  ResultsFile a{"a.csv", {}};
  for (int rank = 0; rank < 3; ++rank) {
    Record r = stamped("nccl", 3);
    r.suite = "inventory";
    r.case_id = "rank/" + std::to_string(rank);
    r.metric = "rank_info";
    r.value = 1;
    r.labels.config = "rank=" + std::to_string(rank) + ";node=n" + std::to_string(rank / 2) +
                      ";gpu=NVIDIA <b>H100;gpu_memory_bytes=85899345920;pcie_width=" + (rank == 2 ? "8" : "16") +
                      ";pcie_width_max=16;pcie_gts=32;pcie_gts_max=32";
    a.records.push_back(r);
  }
  Record nic = stamped("nccl", 3);
  nic.suite = "inventory";
  nic.case_id = "node/n0/nic/eth0";
  nic.metric = "nic_speed";
  nic.unit = "bytes_per_second";
  nic.value = 25e9 / 8;
  nic.labels.config = "node=n0;ranks=0-1;nic=eth0;link_layer=ethernet";
  a.records.push_back(nic);
  Record check = stamped("nccl", 3);
  check.suite = "inventory";
  check.case_id = "mismatch/1";
  check.metric = "check";
  check.verdict = Verdict::fail;
  check.labels.config = "item=gpu_pcie_width;ranks=2";
  check.detail = "gpu_pcie_width: rank 2 (node n1) trained its PCIe link at x8, the part supports x16";
  a.records.push_back(check);
  const ReportData data = group_results({a});
  ASSERT_EQ(data.inventory.size(), 4u);
  ASSERT_EQ(data.inventory_flagged.size(), 1u);
  EXPECT_EQ(data.inventory_flagged.begin()->second, std::set<int>{2});
  const std::string html = render_html(data, [](const Plot&) { return std::string("<svg></svg>"); });
  EXPECT_NE(html.find("<h2 id=\"inventory\">"), std::string::npos);
  EXPECT_EQ(html.find("<b>H100"), std::string::npos);  // escaped, as every text from a CSV
  size_t named = 0;
  for (size_t at = html.find("<tr class=\"named\">"); at != std::string::npos; at = html.find("<tr class=\"named\">", at + 1)) {
    ++named;
    EXPECT_NE(html.find("x8 of x16, 32 of 32 GT/s", at), std::string::npos);
  }
  EXPECT_EQ(named, 1u);
  EXPECT_NE(html.find("80.0"), std::string::npos);  // GiB
  EXPECT_NE(html.find(">25<"), std::string::npos);   // Gbit/s
  // Results without inventory rows (files written before it) draw no such section.
  ResultsFile old{"old.csv", {collective("mpi", "busbw", "all_reduce", "f32", 8, 1)}};
  EXPECT_EQ(render_html(group_results({old}), [](const Plot&) { return std::string(); }).find("id=\"inventory\""),
            std::string::npos);
}

// The acceptance section: the verdict and one line per failed item, a bar chart per per-rank
// figure with the named rank in red and each rank's bound dashed, the profile's thresholds with
// their citations, and a copy of the pair matrix heat map.
TEST(Html, TheAcceptanceSectionNamesTheFailedItemsAndDrawsEachRank) {
  ResultsFile a{"a.csv", {}};
  for (int rank = 0; rank < 4; ++rank) {
    Record r = stamped("mpi", 4);
    r.suite = "hardware";
    r.case_id = "gemm/f64/alone";
    r.metric = "matmul_throughput";
    r.unit = "flop_per_second";
    r.value = rank == 2 ? 6e9 : 48e9;
    r.threshold = 38e9;
    r.verdict = rank == 2 ? Verdict::fail : Verdict::pass;
    r.labels.config = "mode=alone;size=512;rank=" + std::to_string(rank) + ";node=n" + std::to_string(rank / 2);
    r.detail = "rank " + std::to_string(rank) + " (node n" + std::to_string(rank / 2) + "): dgemm";
    if (rank == 2) r.detail += ", 88% below the median of its 3 peers <b>";
    a.records.push_back(r);
  }
  Record check = stamped("mpi", 4);
  check.suite = "profile";
  check.case_id = "demo/1/matmul_throughput";
  check.metric = "check";
  check.verdict = Verdict::fail;
  check.detail = "demo.toml [[threshold]] #1: 1 of 4 records fail (0.6 of fp64 ... H100 datasheet)";
  a.records.push_back(check);
  Record pair = stamped("mpi", 4);
  pair.suite = "topology";
  pair.case_id = "pair/0/1";
  pair.metric = "p2p_bandwidth";
  pair.unit = "bytes_per_second";
  pair.value = 9e9;
  pair.labels.config = "src=0;dst=1;direction=one_way";
  a.records.push_back(pair);
  const ReportData data = group_results({a});
  EXPECT_EQ(data.per_rank.size(), 4u);
  EXPECT_EQ(data.profile_checks.size(), 1u);
  const std::string html = render_html(data, [](const Plot& p) { return "<svg id=\"" + p.id + "\"></svg>"; });
  const size_t at = html.find("<h2 id=\"acceptance\">");
  ASSERT_NE(at, std::string::npos);
  const std::string section = html.substr(at, html.find("<h2 id=\"summary\">") - at);
  EXPECT_NE(section.find("Not accepted: 2 items failed."), std::string::npos);  // rank 2 and the threshold
  EXPECT_NE(section.find("<li><b>hardware gemm/f64/alone matmul_throughput</b>: rank 2 (node n1): dgemm, 88% below"),
            std::string::npos);
  EXPECT_EQ(section.find("<b>\n"), std::string::npos);
  EXPECT_EQ(section.find("peers <b>"), std::string::npos);  // the CSV's text escaped
  // One bar per rank, rank 2's named, each rank's bound (38 GFLOP/s) dashed across its bar.
  size_t bars = 0, named = 0, bounds = 0;
  for (size_t i = section.find("<rect class=\"bar"); i != std::string::npos; i = section.find("<rect class=\"bar", i + 1)) {
    ++bars;
    const std::string named_bar = "<rect class=\"bar-named\"";
    if (section.compare(i, named_bar.size(), named_bar) == 0) ++named;
  }
  for (size_t i = section.find("class=\"threshold\""); i != std::string::npos; i = section.find("class=\"threshold\"", i + 1)) ++bounds;
  EXPECT_EQ(bars, 4u);
  EXPECT_EQ(named, 1u);
  EXPECT_EQ(bounds, 4u);
  EXPECT_NE(section.find(">38</text>"), std::string::npos);   // the bound, in GFLOP/s, written once
  EXPECT_NE(section.find(">6</text>"), std::string::npos);    // rank 2's figure
  EXPECT_NE(section.find("demo.toml [[threshold]] #1: 1 of 4 records fail (0.6 of fp64 ... H100 datasheet)"),
            std::string::npos);
  EXPECT_NE(section.find("id=\"acceptance-pairs\""), std::string::npos);
  EXPECT_NE(section.find("<svg id=\"acceptance-"), std::string::npos);  // the heat map again, under its own id
  // Results with none of it (a collectives run) have no acceptance section.
  ResultsFile old{"old.csv", {collective("mpi", "busbw", "all_reduce", "f32", 8, 1)}};
  EXPECT_EQ(render_html(group_results({old}), [](const Plot&) { return std::string(); }).find("id=\"acceptance\""),
            std::string::npos);
}

TEST(Html, TheGateSectionListsEveryJudgedRowWorstFirstWithItsDetectableChange) {
  Comparison gate;
  gate.baseline_runs = 10;
  gate.regressions = 1;
  gate.blind = 1;
  gate.unchanged = 1;
  gate.detect_larger = 3;
  gate.min_runs = 7;
  const auto row = [](const std::string& label, Outcome outcome, double change, double detectable, const std::string& why) {
    ComparedRow r;
    r.label = label;
    r.baseline = collective("mpi", "time", "all_gather", "f32", 65536, 1e-5);
    r.current = r.baseline;
    r.current.value = r.baseline.value * (1 + change / 100);
    r.outcome = outcome;
    r.change_percent = change;
    r.detectable_percent = detectable;
    r.reason = why;
    return r;
  };
  gate.rows = {row("all_reduce/f32/sum/4", Outcome::unchanged, 1, 3, "inside the noise"),
               row("all_gather/f32/65536", Outcome::blind, 20, 230, "blind: sees only +230% <or more>"),
               row("all_gather/f32/1048576", Outcome::regressed, 40, 12, "+40% worse"),
               row("all_reduce/f32/sum/8", Outcome::not_judged, NAN, NAN, "no direction")};
  ReportData data = group_results({});
  data.gate = &gate;
  const std::string html = render_html(data, [](const Plot&) { return std::string(); });
  const size_t section = html.find("<h2 id=\"gate\">Regression gate</h2>");
  ASSERT_NE(section, std::string::npos);
  EXPECT_NE(html.find("<b>blind</b> 1 (could not have seen a change of the tolerance: never a pass)"), std::string::npos);
  EXPECT_NE(html.find("3 only a larger change, 0 nothing (fewer than 7 baseline runs)"), std::string::npos);
  // Worst first: regressed, then blind, then unchanged; a row not judged is not listed.
  const size_t regressed = html.find("all_gather/f32/1048576", section), blind = html.find("all_gather/f32/65536", section),
               unchanged = html.find("all_reduce/f32/sum/4<", section);
  ASSERT_NE(regressed, std::string::npos);
  ASSERT_NE(blind, std::string::npos);
  ASSERT_NE(unchanged, std::string::npos);
  EXPECT_LT(regressed, blind);
  EXPECT_LT(blind, unchanged);
  EXPECT_EQ(html.find("all_reduce/f32/sum/8", section), std::string::npos);
  EXPECT_NE(html.find("<td class=\"n\">+230%</td><td class=\"skip\">blind</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"fail\">REGRESSED</td>"), std::string::npos);
  EXPECT_NE(html.find("+230% &lt;or more&gt;"), std::string::npos);  // reasons are escaped
  // Without a gate, no section.
  data.gate = nullptr;
  EXPECT_EQ(render_html(data, [](const Plot&) { return std::string(); }).find("id=\"gate\""), std::string::npos);
}

TEST(Gnuplot, ScriptCarriesTheDataInlineAndQuotesLabels) {
  Plot p;
  p.title = "it's all_reduce";
  p.log_x = true;
  p.y_scale = 1e9;
  p.series.push_back({"o'brien", 0, 0, {{8, 2e9}, {1024, 4e9}}});
  const std::string script = gnuplot_script(p);
  EXPECT_NE(script.find("set title 'it''s all_reduce'"), std::string::npos) << script;
  EXPECT_NE(script.find("noenhanced"), std::string::npos);  // underscores stay underscores
  EXPECT_NE(script.find("set logscale x 2"), std::string::npos);
  EXPECT_NE(script.find("$S0 << EOD\n8 2\n1024 4\nEOD\n"), std::string::npos) << script;  // GB/s
  EXPECT_NE(script.find("title 'o''brien'"), std::string::npos);
  EXPECT_NE(script.find("'1K' 1024"), std::string::npos);  // sizes labelled as the command line writes them
}

bool have_gnuplot() { return std::system("gnuplot --version >/dev/null 2>&1") == 0; }

TEST(Gnuplot, SvgIsInlineReadyWithIdsUniqueToEachPlot) {
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  Plot p;
  p.title = "t";
  p.series.push_back({"a <b> & c", 0, 0, {{1, 1}, {2, 3}}});
  const std::string one = run_gnuplot(gnuplot_script(p), "p0");
  const std::string two = run_gnuplot(gnuplot_script(p), "p1");
  EXPECT_EQ(one.rfind("<svg", 0), 0u);  // no XML prolog inside HTML
  EXPECT_EQ(one.find("<script"), std::string::npos);
  EXPECT_NE(one.find("a &lt;b"), std::string::npos);  // gnuplot escapes its text for SVG
  EXPECT_EQ(one.find("id='gpPt"), std::string::npos);
  EXPECT_NE(one.find("id='p0-gpPt0'"), std::string::npos);
  EXPECT_NE(two.find("id='p1-gpPt0'"), std::string::npos);
  EXPECT_EQ(one.find("'#gpPt"), std::string::npos);  // references follow their ids
}

// gnuplot takes |y| >= DBL_MAX/2 for undefined and fails a plot with no defined point: such
// values are left out (and counted) so that the report is still drawn.
TEST(Gnuplot, HugeValuesAreLeftOutAndTheReportIsDrawn) {
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  ResultsFile huge{"huge.csv", {}};
  for (int64_t bytes : {8, 64, 512}) {
    huge.records.push_back(collective("mpi", "busbw", "all_reduce", "f32", bytes, 1e308));
    huge.records.push_back(collective("mpi", "time", "all_reduce", "f32", bytes, 1e308));
    huge.records.push_back(equivalence("mpi", "ddp", "f32", static_cast<int>(bytes / 8), 1e308, 1e308));
  }
  // Time is drawn in microseconds: 1e308 s is past every double there, 2e-6 s is 2 us.
  huge.records.push_back(collective("mpi", "time", "all_gather", "f32", 8, 1e308));
  huge.records.push_back(collective("mpi", "time", "all_gather", "f32", 64, 2e-6));
  const fs::path page = fs::temp_directory_path() / ("dtsuite_report_huge_" + std::to_string(getpid()) + ".html");
  EXPECT_NO_THROW(write_report({huge}, page.string()));
  fs::remove(page);
  // The drawable point stays; the huge one is counted in the note.
  const ReportData data = group_results({huge});
  const Plot* gather = find_plot(data, "latency-all_gather");
  ASSERT_NE(gather, nullptr);
  ASSERT_EQ(gather->series.size(), 1u);
  EXPECT_EQ(gather->series[0].points.size(), 1u);
  EXPECT_NE(gather->note.find("1 record without a finite value gnuplot can draw"), std::string::npos) << gather->note;
}

TEST(Gnuplot, FailureIsAnIoErrorWithGnuplotsMessage) {
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  try {
    run_gnuplot("plot $NOSUCH using 1:2\n", "p9");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::io);
    EXPECT_NE(std::string(e.what()).find("gnuplot failed on plot p9"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dts

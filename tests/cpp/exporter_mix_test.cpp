// The exporter benchmark's events (tests/support/event_mix.h) through the benchmark's own
// pipeline (ring → Drainer → exporters, the session's drain code) make traces that our reader and
// validator accept: what P4 measures is the formatting of valid, realistic traces.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "tests/cpp/test_util.h"
#include "tests/support/event_mix.h"

using namespace fqntrace;
using namespace fqntrace::testing;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// `python -m fqntrace validate` from the source tree (standard library only, no torch).
ChildResult validate(const std::string& path) {
  return run_child({FQNTRACE_PYTHON, "-m", "fqntrace", "validate", path},
                   {{"PYTHONPATH", FQNTRACE_SOURCE_DIR "/python"}});
}

}  // namespace

TEST(ExporterMixTest, BenchmarkEventsMakeValidTraces) {
  constexpr uint64_t kSteps = 3;
  std::string path = make_temp_dir() + "/mix.json";
  mix::MixPipeline pipeline("all", path);
  uint64_t events = 0;
  for (uint64_t k = 0; k < kSteps; ++k) {
    pipeline.push_step(k);
    events += pipeline.drain();
  }
  pipeline.finish();
  const mix::MixCounts& c = pipeline.mix().counts();
  ASSERT_EQ(events, kSteps * c.total());
  // The mix has every kind of event the benchmark claims.
  EXPECT_GT(c.ops, 100u);
  EXPECT_GT(c.modules, 20u);
  EXPECT_GT(c.nodes, 50u);
  EXPECT_GT(c.flows, 50u);
  EXPECT_EQ(c.engine, c.nodes);
  EXPECT_GT(c.user_scopes, 0u);
  EXPECT_GT(c.collectives, 0u);

  ASSERT_EQ(pipeline.paths().size(), 2u);
  for (const std::string& p : pipeline.paths()) {
    ChildResult r = validate(p);
    EXPECT_EQ(r.exit_code, 0) << p << ": " << r.stderr_text;
  }

  nlohmann::json trace = nlohmann::json::parse(read_file(path));
  std::map<std::string, int> phases;
  std::set<std::string> kinds;
  int flow_starts = 0, flow_ends = 0, with_seq = 0, collectives = 0, modules = 0;
  uint64_t module_spans = 0;  // the drain's backward module spans, on module tracks
  std::set<std::pair<uint64_t, uint64_t>> tids;
  for (const auto& e : trace.at("traceEvents")) {
    std::string ph = e.at("ph");
    flow_starts += ph == "s";
    flow_ends += ph == "f";
    if (ph != "X") continue;
    if (e.at("cat") == "module_span") {
      ++module_spans;
      EXPECT_NE(e.at("tid").get<uint64_t>() & 0x40000000u, 0u);
      EXPECT_EQ(e.at("args").at("phase"), "backward");
      continue;
    }
    tids.insert({e.at("pid").get<uint64_t>(), e.at("tid").get<uint64_t>()});
    const auto& args = e.at("args");
    ++phases[args.at("phase").get<std::string>()];
    with_seq += args.contains("Sequence number");
    collectives += args.contains("collective");
    modules += args.contains("module_type");
  }
  EXPECT_EQ(static_cast<uint64_t>(flow_starts), kSteps * c.flows);
  EXPECT_EQ(flow_ends, flow_starts);
  EXPECT_EQ(static_cast<uint64_t>(modules), kSteps * c.modules);
  EXPECT_EQ(static_cast<uint64_t>(collectives), kSteps * c.collectives);
  EXPECT_GT(with_seq, 0);
  EXPECT_GT(phases["forward"], 0);
  EXPECT_GT(phases["backward"], 0);
  EXPECT_EQ(tids.size(), 2u);   // the training thread and the communication thread
  EXPECT_GT(module_spans, 0u);  // the mix's backward makes them; validate accepted them above
  EXPECT_EQ(trace.at("fqntrace").at("events"), events + module_spans);
  EXPECT_EQ(trace.at("fqntrace").at("dropped_events"), 0);
}

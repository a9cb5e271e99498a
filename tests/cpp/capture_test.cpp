// On demand (docs/on-demand.md) in C++: the FQNTRACE_STEPS value with `demand`, the capture
// settings, the request reader, and an armed session whose capture records exactly the steps
// asked for, into its own file, with no callback installed before or after.
#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <set>

#include "fqntrace/step.h"
#include "plugin/config.h"
#include "plugin/json_reader.h"
#include "plugin/session.h"
#include "plugin/step_window.h"
#include "tests/cpp/test_model.h"
#include "tests/cpp/test_util.h"

using nlohmann::json;
using namespace fqntrace;
using namespace fqntrace::testing;

namespace {

ConfigResult parse_with(const std::string& path, std::map<std::string, std::string> env) {
  return parse_config(
      path.c_str(),
      [env](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      getpid());
}

std::set<std::string> step_names(const json& trace) {
  std::set<std::string> names;
  for (const auto& e : slices(trace)) {
    std::string name = e.at("name").get<std::string>();
    if (name.rfind("ProfilerStep#", 0) == 0) names.insert(name);
  }
  return names;
}

}  // namespace

TEST(CaptureTest, StepsSettingTakesDemandAloneOrBesideAWindow) {
  StepWindow w;
  bool armed = false;
  std::string problem;
  ASSERT_TRUE(parse_steps_setting("demand", &w, &armed, &problem));
  EXPECT_TRUE(armed);
  EXPECT_TRUE(w.all());
  ASSERT_TRUE(parse_steps_setting("0:1:50,demand", &w, &armed, &problem));
  EXPECT_TRUE(armed);
  EXPECT_EQ(w.period, 50u);
  EXPECT_TRUE(w.contains(100) && !w.contains(101));
  ASSERT_TRUE(parse_steps_setting("demand,3:5", &w, &armed, &problem));
  EXPECT_TRUE(armed && w.contains(3) && !w.contains(5));
  ASSERT_TRUE(parse_steps_setting("3:5", &w, &armed, &problem));
  EXPECT_FALSE(armed);
  for (const char* bad :
       {"demand,demand", "1:2,3:4", "demand,", "Demand", "demand:1:2", ",demand"}) {
    problem.clear();
    EXPECT_FALSE(parse_steps_setting(bad, &w, &armed, &problem)) << bad;
    EXPECT_FALSE(problem.empty()) << bad;
    EXPECT_FALSE(armed) << bad;
    EXPECT_TRUE(w.all()) << bad;
  }
}

TEST(CaptureTest, ConfigArmedWritesNoTraceFileAndChecksCaptureSettings) {
  ConfigResult r = parse_with("t.json", {{"FQNTRACE_STEPS", "demand"}});
  ASSERT_TRUE(r.config);
  EXPECT_TRUE(r.config->armed);
  EXPECT_FALSE(r.config->trace_file);
  EXPECT_FALSE(r.config->steps.contains(0));
  r = parse_with("t.json", {{"FQNTRACE_STEPS", "0:1:50,demand"},
                            {"FQNTRACE_CAPTURE_SLOW", "2.5"},
                            {"FQNTRACE_CAPTURE_STEPS", "7"},
                            {"FQNTRACE_CAPTURE_MAX", "2"}});
  ASSERT_TRUE(r.config);
  EXPECT_TRUE(r.config->armed && r.config->trace_file);
  EXPECT_DOUBLE_EQ(r.config->capture_slow, 2.5);
  EXPECT_EQ(r.config->capture_steps, 7u);
  EXPECT_EQ(r.config->capture_max, 2u);
  EXPECT_TRUE(r.config->warnings.empty());
  r = parse_with("t.json", {{"FQNTRACE_CAPTURE_SLOW", "0.5"},
                            {"FQNTRACE_CAPTURE_STEPS", "0"},
                            {"FQNTRACE_CAPTURE_MAX", "x"}});
  ASSERT_TRUE(r.config);
  EXPECT_EQ(r.config->capture_slow, 0.0);
  EXPECT_EQ(r.config->capture_steps, 3u);
  EXPECT_EQ(r.config->capture_max, 5u);
  ASSERT_EQ(r.config->warnings.size(), 3u);
  EXPECT_NE(r.config->warnings[0].find("FQNTRACE_CAPTURE_SLOW=0.5"), std::string::npos);
  r = parse_with("t.json", {{"FQNTRACE_STEPS", "demand,demand"}});
  ASSERT_TRUE(r.config);
  EXPECT_FALSE(r.config->armed);
  EXPECT_TRUE(r.config->trace_file);
  EXPECT_NE(r.config->warning.find("demand"), std::string::npos);
}

TEST(CaptureTest, JsonReaderReadsRequestsAndRejectsDamage) {
  auto v = json_reader::parse(
      R"({"fqntrace_request": 1, "id": "a\"b\u00e9", "targets": [{"host": "h", "pid": 42}],)"
      R"( "at_step": null, "steps": 5, "seconds": 1.5e0, "memory": true, "x": [[], {}, false]})");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->get("fqntrace_request")->number, 1);
  EXPECT_EQ(v->get("id")->string, "a\"b\xc3\xa9");
  EXPECT_EQ(v->get("targets")->array.at(0).get("pid")->number, 42);
  EXPECT_EQ(v->get("at_step")->type, json_reader::Value::Type::kNull);
  EXPECT_DOUBLE_EQ(v->get("seconds")->number, 1.5);
  EXPECT_TRUE(v->get("memory")->boolean);
  EXPECT_FALSE(v->get("x")->array.at(2).boolean);
  EXPECT_EQ(v->get("missing"), nullptr);
  for (const char* bad : {"", "{", "{\"a\": }", "{\"a\": 1,}", "[1 2]", "{\"a\": \"x}",
                          "{\"a\": tru}", "{} x", "{\"a\": \"\x01\"}", "{\"a\": 1e}"}) {
    EXPECT_FALSE(json_reader::parse(bad)) << bad;
  }
  std::string deep(40, '[');
  deep += std::string(40, ']');
  EXPECT_FALSE(json_reader::parse(deep));
}

// Armed: no callback and no trace file; fqntrace::capture(2) during step 3 records steps 4 and 5
// into t.capture-1.json, and the callback is gone again from step 6 on.
TEST(CaptureTest, ArmedSessionCapturesTheNextStepsIntoTheirOwnFile) {
  torch::manual_seed(0);
  Net net;
  trace_module(*net, "Net");
  std::string dir = make_temp_dir();
  std::string path = dir + "/t.json";
  ConfigResult r = parse_with(path, {{"FQNTRACE_STEPS", "demand"}});
  ASSERT_TRUE(r.config);
  std::string error;
  ASSERT_TRUE(start_session(*r.config, &error)) << error;
  std::vector<bool> callbacks;
  for (int step = 0; step < 8; ++step) {
    callbacks.push_back(at::hasGlobalCallbacks());
    if (step == 3) {
      EXPECT_TRUE(fqntrace::capture(2));
      EXPECT_FALSE(fqntrace::capture(2));  // one at a time
    }
    train_step(net);
    fqntrace::step();
  }
  EXPECT_EQ(callbacks, (std::vector<bool>{false, false, false, false, true, true, false, false}));
  ASSERT_TRUE(stop_session());
  EXPECT_NE(::access(path.c_str(), F_OK), 0);  // armed alone: no trace file
  std::ifstream in(dir + "/t.capture-1.json");
  ASSERT_TRUE(in.good());
  json trace = json::parse(in);
  EXPECT_EQ(step_names(trace), (std::set<std::string>{"ProfilerStep#4", "ProfilerStep#5"}));
  EXPECT_EQ(trace.at("capture").at("reason"), "program");
  EXPECT_EQ(trace.at("capture").at("first_step"), 4);
  EXPECT_TRUE(trace.at("fqntrace").at("complete").get<bool>());
  std::set<std::string> fqns;
  for (const auto& e : slices(trace)) fqns.insert(e.at("args").at("fqn").get<std::string>());
  EXPECT_TRUE(fqns.count("Net.blocks.1.fc2")) << "modules are named in a capture";
}

// A capture in a traced (not armed) session: the trace file keeps every step, the capture
// file holds its own.
TEST(CaptureTest, CaptureBesideAFullTraceLeavesTheTraceWhole) {
  torch::manual_seed(0);
  Net net;
  trace_module(*net, "Net");
  std::string dir = make_temp_dir();
  std::string path = dir + "/full.json";
  ConfigResult r = parse_with(path, {});
  ASSERT_TRUE(r.config);
  std::string error;
  ASSERT_TRUE(start_session(*r.config, &error)) << error;
  for (int step = 0; step < 5; ++step) {
    if (step == 1) {
      EXPECT_TRUE(fqntrace::capture(1));
    }
    train_step(net);
    fqntrace::step();
  }
  json trace = stop_and_load(path);
  EXPECT_EQ(step_names(trace).size(), 5u);
  std::ifstream in(dir + "/full.capture-1.json");
  ASSERT_TRUE(in.good());
  EXPECT_EQ(step_names(json::parse(in)), (std::set<std::string>{"ProfilerStep#2"}));
}

// The slow-step trigger in a full trace (every step recorded, so all count): a step made 50 ms
// slower (after the 10 steps of warm-up and 16 samples) starts a capture of the next two steps,
// whose header says why.
TEST(CaptureTest, SlowStepInAFullTraceCapturesTheNextSteps) {
  torch::manual_seed(0);
  Net net;
  trace_module(*net, "Net");
  std::string dir = make_temp_dir();
  std::string path = dir + "/slow.json";
  ConfigResult r =
      parse_with(path, {{"FQNTRACE_CAPTURE_SLOW", "5"}, {"FQNTRACE_CAPTURE_STEPS", "2"}});
  ASSERT_TRUE(r.config);
  std::string error;
  ASSERT_TRUE(start_session(*r.config, &error)) << error;
  for (int step = 0; step < 40; ++step) {
    train_step(net);
    if (step == 30) ::usleep(50 * 1000);
    fqntrace::step();
  }
  json trace = stop_and_load(path);
  EXPECT_EQ(step_names(trace).size(), 40u);
  std::ifstream in(dir + "/slow.capture-1.json");
  ASSERT_TRUE(in.good());
  json capture = json::parse(in);
  EXPECT_EQ(step_names(capture), (std::set<std::string>{"ProfilerStep#31", "ProfilerStep#32"}));
  EXPECT_EQ(capture.at("capture").at("reason").get<std::string>().rfind("slow step 30: ", 0), 0u);
  EXPECT_NE(::access((dir + "/slow.capture-2.json").c_str(), F_OK), 0);
}

// Training steps in C++: fqntrace::step() ends ProfilerStep#N, and a step window installs the
// observer's callback only while a recorded step runs (outside it, tracing costs what "off" costs).
#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include <set>

#include "fqntrace/step.h"
#include "plugin/config.h"
#include "plugin/session.h"
#include "tests/cpp/test_model.h"
#include "tests/cpp/test_util.h"

using nlohmann::json;
using namespace fqntrace;
using namespace fqntrace::testing;

// FQNTRACE_STEPS=2:3 over steps 0..3: the callback exists during step 2 only, the trace holds
// ProfilerStep#2 and nothing outside it, and module names are right in it.
TEST(StepsTest, WindowInstallsTheCallbackOnlyForRecordedSteps) {
  torch::manual_seed(0);
  Net net;
  trace_module(*net, "Net");
  std::string path = make_temp_dir() + "/steps.json";
  ConfigResult r = parse_config(
      path.c_str(),
      [](const char* name) -> const char* {
        return std::string(name) == "FQNTRACE_STEPS" ? "2:3" : nullptr;
      },
      getpid());
  ASSERT_TRUE(r.config.has_value()) << r.problem;
  std::string error;
  ASSERT_TRUE(start_session(*r.config, &error)) << error;
  std::vector<bool> callbacks;
  for (int step = 0; step < 4; ++step) {
    callbacks.push_back(at::hasGlobalCallbacks());
    train_step(net);
    fqntrace::step();
  }
  EXPECT_FALSE(at::hasGlobalCallbacks());
  json trace = stop_and_load(path);
  EXPECT_EQ(callbacks, (std::vector<bool>{false, false, true, false}));

  std::vector<json> events = slices(trace);
  const json* step_range = nullptr;
  std::set<std::string> names;
  for (const auto& e : events) {
    std::string name = e.at("name").get<std::string>();
    if (name.rfind("ProfilerStep#", 0) == 0) {
      names.insert(name);
      step_range = &e;
    }
  }
  ASSERT_EQ(names, (std::set<std::string>{"ProfilerStep#2"}));
  ASSERT_NE(step_range, nullptr);
  EXPECT_EQ(step_range->at("cat"), "user_annotation");
  double start = step_range->at("ts").get<double>();
  double end = start + step_range->at("dur").get<double>();
  int ops = 0;
  std::set<std::string> fqns;
  for (const auto& e : events) {
    if (e.at("cat") != "cpu_op") continue;
    ++ops;
    EXPECT_GE(e.at("ts").get<double>(), start - 0.001) << e.dump();
    EXPECT_LE(e.at("ts").get<double>() + e.at("dur").get<double>(), end + 0.001) << e.dump();
    fqns.insert(e.at("args").at("fqn").get<std::string>());
  }
  EXPECT_GT(ops, 20);
  EXPECT_TRUE(fqns.count("Net.blocks.0.fc1")) << "module names inside the window";
}

// Without a session, step() does nothing (and never fails).
TEST(StepsTest, StepWithoutSessionIsHarmless) {
  fqntrace::step();
  EXPECT_FALSE(at::hasGlobalCallbacks());
}

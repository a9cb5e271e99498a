// The observer end to end: a nested C++ model traced forward + backward, the file parsed back.
#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <set>

#include "record_function/module_ranges.h"
#include "tests/cpp/test_model.h"
#include "tests/cpp/test_util.h"

using nlohmann::json;
using namespace fqntrace::testing;

namespace {

// A forward (or recompute) module range of the thread, not a span of its module track.
bool is_module_span(const json& e) {
  return e.at("cat") == "user_annotation" && e.at("args").contains("module_type");
}
std::string fqn_of(const json& e) { return e.at("args").at("fqn").get<std::string>(); }
std::string phase_of(const json& e) { return e.at("args").at("phase").get<std::string>(); }
double end_of(const json& e) { return e.at("ts").get<double>() + e.at("dur").get<double>(); }
bool contains(const json& outer, const json& inner) {
  return outer.at("tid") == inner.at("tid") &&
         outer.at("ts").get<double>() <= inner.at("ts").get<double>() &&
         end_of(inner) <= end_of(outer) + 1e-9;
}

// Counts what the dispatcher hands to any observer, independently of fqntrace.
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_function_ranges{0};
std::atomic<int64_t> g_backward_ranges{0};

std::unique_ptr<at::ObserverContext> count_start(const at::RecordFunction& fn) {
  if (!g_counting.load()) return nullptr;
  if (fn.scope() == at::RecordScope::FUNCTION) ++g_function_ranges;
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) ++g_backward_ranges;
  return nullptr;
}

struct TracedNet {
  json trace;
  std::vector<json> events;
};

TracedNet trace_net(int steps) {
  torch::manual_seed(0);
  Net net;
  fqntrace::trace_module(*net, "Net");
  std::string path = make_temp_dir() + "/net.json";
  start_tracing(path);
  for (int i = 0; i < steps; ++i) train_step(net);
  TracedNet out;
  out.trace = stop_and_load(path);
  out.events = slices(out.trace);
  return out;
}

}  // namespace

// Every forward op carries the fqn of the innermost module span around it, and named modules
// appear with ModTracker's names.
TEST(ObserverTest, ForwardOpsCarryInnermostFqn) {
  TracedNet t = trace_net(2);
  std::vector<json> spans;
  for (const auto& e : t.events) {
    if (is_module_span(e)) spans.push_back(e);
  }
  std::set<std::string> span_fqns;
  for (const auto& s : spans) span_fqns.insert(fqn_of(s));
  for (const char* expected :
       {"Net", "Net.stem", "Net.stem.0", "Net.stem.1", "Net.blocks.0", "Net.blocks.1",
        "Net.blocks.0.fc1", "Net.blocks.1.fc2", "Net.act", "Net.head"}) {
    EXPECT_TRUE(span_fqns.count(expected)) << expected;
  }
  int checked = 0;
  for (const auto& e : t.events) {
    if (e.at("cat") != "cpu_op" || phase_of(e) != "forward") continue;
    const json* innermost = nullptr;
    for (const auto& s : spans) {
      if (contains(s, e) && (innermost == nullptr || contains(*innermost, s))) innermost = &s;
    }
    std::string expected = innermost != nullptr ? fqn_of(*innermost) : "Global";
    EXPECT_EQ(fqn_of(e), expected) << e.dump();
    ++checked;
  }
  EXPECT_GT(checked, 40);
  // The module used twice gets one span per call, both under the same fqn.
  int act_calls = 0;
  for (const auto& s : spans) act_calls += fqn_of(s) == "Net.act";
  EXPECT_EQ(act_calls, 2 * 2);
  EXPECT_FALSE(at::hasGlobalCallbacks());
}

// The backward node of each Linear (AddmmBackward0) and the mm ops inside it carry that
// Linear's fqn; AccumulateGrad carries the owner of the parameter.
TEST(ObserverTest, BackwardOpsInheritForwardFqn) {
  TracedNet t = trace_net(1);
  std::map<std::string, int> forward_addmm, backward_nodes;
  for (const auto& e : t.events) {
    if (e.at("name") == "aten::addmm" && phase_of(e) == "forward") ++forward_addmm[fqn_of(e)];
    if (e.at("name") == "AddmmBackward0") {
      EXPECT_EQ(phase_of(e), "backward");
      ++backward_nodes[fqn_of(e)];
      int mms = 0;
      for (const auto& op : t.events) {
        if (op.at("name") == "aten::mm" && contains(e, op)) {
          EXPECT_EQ(fqn_of(op), fqn_of(e)) << op.dump();
          EXPECT_EQ(phase_of(op), "backward");
          ++mms;
        }
      }
      EXPECT_GE(mms, 1) << "no mm under " << e.dump();
    }
  }
  std::map<std::string, int> expected = {{"Net.stem.0", 1},       {"Net.blocks.0.fc1", 1},
                                         {"Net.blocks.0.fc2", 1}, {"Net.blocks.1.fc1", 1},
                                         {"Net.blocks.1.fc2", 1}, {"Net.head", 1}};
  EXPECT_EQ(forward_addmm, expected);
  EXPECT_EQ(backward_nodes, expected);
  // Gradient accumulation: one AccumulateGrad per parameter, attributed to its Linear.
  std::map<std::string, int> accumulate;
  for (const auto& e : t.events) {
    if (e.at("name") == "torch::autograd::AccumulateGrad") ++accumulate[fqn_of(e)];
    std::string name = e.at("name");
    if (name.find("evaluate_function: torch::autograd::AccumulateGrad") != std::string::npos) {
      EXPECT_NE(fqn_of(e), "Global") << e.dump();
    }
  }
  std::map<std::string, int> two_each;
  for (const auto& [fqn, n] : expected) two_each[fqn] = 2;  // weight and bias
  EXPECT_EQ(accumulate, two_each);
}

// Slices nest on every thread, and each fwdbwd flow joins the forward op that created a node
// to that node (same sequence number, same fqn).
TEST(ObserverTest, SlicesNestAndFlowsJoinForwardToBackward) {
  TracedNet t = trace_net(1);
  std::map<uint64_t, std::vector<json>> by_tid;
  for (const auto& e : t.events) by_tid[e.at("tid").get<uint64_t>()].push_back(e);
  for (auto& [tid, list] : by_tid) {
    std::sort(list.begin(), list.end(), [](const json& a, const json& b) {
      return a.at("ts").get<double>() != b.at("ts").get<double>()
                 ? a.at("ts").get<double>() < b.at("ts").get<double>()
                 : a.at("dur").get<double>() > b.at("dur").get<double>();
    });
    std::vector<double> open_ends;
    for (const auto& e : list) {
      while (!open_ends.empty() && open_ends.back() <= e.at("ts").get<double>())
        open_ends.pop_back();
      if (!open_ends.empty()) {
        EXPECT_LE(end_of(e), open_ends.back() + 1e-9) << e.dump();
      }
      open_ends.push_back(end_of(e));
    }
  }
  std::map<uint64_t, json> starts, finishes;
  for (const auto& e : t.trace.at("traceEvents")) {
    if (e.value("ph", "") == "s") starts[e.at("id")] = e;
    if (e.value("ph", "") == "f") finishes[e.at("id")] = e;
  }
  ASSERT_GE(starts.size(), 6u);
  ASSERT_EQ(starts.size(), finishes.size());
  auto slice_at = [&](const json& point, bool node) -> const json* {
    for (const auto& e : t.events) {
      bool is_node = e.at("args").contains("Fwd thread id") &&
                     e.at("name").get<std::string>().rfind("autograd::engine", 0) != 0;
      if (is_node == node && e.at("tid") == point.at("tid") && e.at("ts") == point.at("ts") &&
          e.at("args").contains("Sequence number")) {
        return &e;
      }
    }
    return nullptr;
  };
  for (const auto& [id, s] : starts) {
    ASSERT_TRUE(finishes.count(id));
    const json* fwd = slice_at(s, false);
    const json* bwd = slice_at(finishes[id], true);
    ASSERT_NE(fwd, nullptr) << s.dump();
    ASSERT_NE(bwd, nullptr) << finishes[id].dump();
    EXPECT_EQ(fwd->at("args").at("Sequence number"), bwd->at("args").at("Sequence number"));
    EXPECT_EQ(fqn_of(*fwd), fqn_of(*bwd));
    EXPECT_EQ(phase_of(*fwd), "forward");
  }
}

// Nothing is lost: the trace has exactly one event per range the dispatcher reported.
TEST(ObserverTest, EventCountMatchesIndependentCounter) {
  torch::manual_seed(0);
  Net net;
  fqntrace::trace_module(*net, "Net");
  auto handle = at::addGlobalCallback(
      at::RecordFunctionCallback(&count_start)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  std::string path = make_temp_dir() + "/count.json";
  start_tracing(path);
  g_function_ranges = 0;
  g_backward_ranges = 0;
  g_counting = true;
  for (int i = 0; i < 5; ++i) train_step(net);
  g_counting = false;
  json trace = stop_and_load(path);
  at::removeCallback(handle);
  int64_t ops = 0, nodes = 0;
  for (const auto& e : slices(trace)) {
    if (e.at("cat") != "cpu_op") continue;
    bool node = e.at("args").contains("Fwd thread id") &&
                e.at("name").get<std::string>().rfind("autograd::engine", 0) != 0;
    (node ? nodes : ops)++;
  }
  EXPECT_EQ(ops, g_function_ranges.load());
  EXPECT_EQ(nodes, g_backward_ranges.load());
  EXPECT_EQ(trace.at("fqntrace").at("dropped_events"), 0);
  EXPECT_FALSE(at::hasGlobalCallbacks());
}

// args.depth counts only written ranges: a serve scope (FSDP2's, never written) adds no level,
// and a range that never reported its end is written ending with the scope that closed it, so
// what it enclosed keeps an enclosing range at every level of its depth.
TEST(ObserverTest, DepthIsTheNestingOfWrittenRanges) {
  std::string path = make_temp_dir() + "/depth.json";
  torch::Tensor a = torch::ones({4});
  start_tracing(path);
  std::unique_ptr<at::RecordFunction> leaked;
  {
    fqntrace::ModuleScope outer("Outer", "OuterType");
    fqntrace::serve_enter(fqntrace::intern("Outer.served"));
    torch::Tensor b = torch::sin(a);  // inside the serve scope: depth 1, in Outer's span (depth 0)
    fqntrace::serve_exit();
    leaked = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
    leaked->before("leaked range");
    torch::Tensor c = torch::cos(a);  // depth 2: inside "leaked range" (1), inside Outer (0)
  }                // Outer closes with "leaked range" still open: it ends here too
  leaked.reset();  // its end comes after its frame was closed: ignored
  json trace = stop_and_load(path);
  std::map<std::string, std::vector<json>> by_name;
  for (const auto& e : slices(trace)) by_name[e.at("name").get<std::string>()].push_back(e);
  ASSERT_EQ(by_name["nn.Module: Outer"].size(), 1u);
  ASSERT_EQ(by_name["leaked range"].size(), 1u);
  const json& outer = by_name["nn.Module: Outer"][0];
  const json& range = by_name["leaked range"][0];
  EXPECT_EQ(outer.at("args").at("depth"), 0);
  EXPECT_EQ(range.at("args").at("depth"), 1);
  EXPECT_DOUBLE_EQ(end_of(range), end_of(outer));
  ASSERT_EQ(by_name["aten::sin"].size(), 1u);
  EXPECT_EQ(by_name["aten::sin"][0].at("args").at("depth"), 1);
  EXPECT_EQ(fqn_of(by_name["aten::sin"][0]), "Outer.served");
  ASSERT_EQ(by_name["aten::cos"].size(), 1u);
  EXPECT_EQ(by_name["aten::cos"][0].at("args").at("depth"), 2);
  EXPECT_TRUE(contains(range, by_name["aten::cos"][0]));
}

// trace_module() lists the tree in the trace's module table: fqn, class and parent per module.
TEST(ObserverTest, TraceModuleWritesTheModuleTable) {
  Net net;
  fqntrace::trace_module(*net, "TableNet");
  std::string path = make_temp_dir() + "/table.json";
  start_tracing(path);
  json trace = stop_and_load(path);
  std::map<std::string, json> entries;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "fqntrace_module") entries[fqn_of(e)] = e.at("args");
  }
  ASSERT_TRUE(entries.count("TableNet"));
  EXPECT_FALSE(entries["TableNet"].contains("parent"));
  ASSERT_TRUE(entries.count("TableNet.blocks.0.fc1"));
  EXPECT_EQ(entries["TableNet.blocks.0.fc1"].at("parent"), "TableNet.blocks.0");
  EXPECT_EQ(entries["TableNet.blocks.0.fc1"].at("module_type"), "Linear");
  EXPECT_EQ(entries["TableNet.stem"].at("parent"), "TableNet");
}

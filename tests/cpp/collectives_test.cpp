// A collective's work range, run later on another thread, inherits its issuer's attribution.
// The issuing op and the work are played here the way c10d and gloo run them: the work's range is
// a std::function created inside the issuing op and wrapped with at::wrapPropagateTLSState, then
// run on a worker thread after the op has returned.
#include <ATen/ThreadLocalState.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <thread>

#include "fqntrace/module_scope.h"
#include "tests/cpp/test_util.h"

using nlohmann::json;
using namespace fqntrace::testing;

namespace {

// Runs `name` as an op of the dispatcher's FUNCTION scope; `body` runs inside it.
void run_op(const char* name, const std::function<void()>& body) {
  at::RecordFunction op(at::RecordScope::FUNCTION);
  if (op.isActive()) op.before(name);
  body();
}

// What a backend does when the issuing op creates its work: capture the issuer's thread-local
// state now, open the work's range later wherever the work runs.
std::function<void()> make_work(const char* work_name) {
  return at::wrapPropagateTLSState([work_name] {
    at::RecordFunction work(at::RecordScope::USER_SCOPE);
    if (work.isActive()) work.before(work_name);
  });
}

std::map<std::string, json> by_fqn(const std::vector<json>& events, const std::string& name) {
  std::map<std::string, json> out;
  for (const auto& e : events) {
    if (e.at("name") == name) out[e.at("args").at("fqn").get<std::string>()] = e;
  }
  return out;
}

}  // namespace

// Two works created in order A, B and run in order B, A on two threads each get their own
// issuer: the match is by identity (the captured state), not by order or by the work's name.
TEST(CollectivesTest, WorkInheritsItsOwnIssuerWhateverTheOrder) {
  std::string path = make_temp_dir() + "/collectives.json";
  start_tracing(path);
  std::function<void()> work_a, work_b;
  {
    fqntrace::ModuleScope block("Net.block0", "Block");
    run_op("c10d::allreduce_", [&] { work_a = make_work("gloo:all_reduce"); });
  }
  {
    fqntrace::ModuleScope block("Net.block1", "Block");
    // gloo runs reduce_scatter_tensor as an all-reduce: the work's name says all_reduce.
    run_op("c10d::_reduce_scatter_base_", [&] { work_b = make_work("gloo:all_reduce"); });
  }
  std::function<void()> orphan = make_work("gloo:broadcast");  // created outside any issuing op
  std::thread([&] { work_b(); }).join();
  std::thread([&] {
    work_a();
    orphan();
  }).join();
  json trace = stop_and_load(path);

  auto works = by_fqn(slices(trace), "gloo:all_reduce");
  ASSERT_EQ(works.size(), 2u);
  EXPECT_EQ(works.at("Net.block0").at("args").at("collective"), "allreduce");
  EXPECT_EQ(works.at("Net.block1").at("args").at("collective"), "reduce_scatter");
  for (const auto& [fqn, w] : works) {
    EXPECT_EQ(w.at("args").at("phase"), "forward");
    EXPECT_EQ(w.at("args").at("async_work"), true);
  }
  auto issuers = by_fqn(slices(trace), "c10d::allreduce_");
  ASSERT_EQ(issuers.count("Net.block0"), 1u);
  // Once the issuing op has returned, its tag is gone from the issuer's thread.
  auto orphans = by_fqn(slices(trace), "gloo:broadcast");
  ASSERT_EQ(orphans.size(), 1u);
  EXPECT_EQ(orphans.begin()->first, "Global");
  EXPECT_EQ(orphans.begin()->second.at("args").at("collective"), "broadcast");
}

// Several threads, each with its own model, forward + backward at once.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <thread>

#include "tests/cpp/test_model.h"
#include "tests/cpp/test_util.h"

using nlohmann::json;
using namespace fqntrace::testing;

// Each thread's ops, spans and backward nodes carry its own model's fqns and no other's.
TEST(ThreadsTest, PerThreadAttributionWithFourThreads) {
  constexpr int kThreads = 4;
  std::vector<Net> nets;
  for (int i = 0; i < kThreads; ++i) {
    nets.emplace_back();
    fqntrace::trace_module(*nets.back(), "Net" + std::to_string(i));
  }
  std::string path = make_temp_dir() + "/threads.json";
  start_tracing(path);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&nets, i] {
      for (int step = 0; step < 3; ++step) train_step(nets[i], 2 + i);
    });
  }
  for (auto& t : threads) t.join();
  json trace = stop_and_load(path);

  std::map<uint64_t, std::set<std::string>> roots_by_tid;
  std::map<std::string, int> addmm_backward_by_root;
  for (const auto& e : slices(trace)) {
    std::string fqn = e.at("args").at("fqn");
    if (fqn == "Global" || e.at("cat") == "module_span") continue;  // module tracks: not threads
    std::string root = fqn.substr(0, fqn.find('.'));
    roots_by_tid[e.at("tid").get<uint64_t>()].insert(root);
    if (e.at("name") == "AddmmBackward0") ++addmm_backward_by_root[root];
  }
  ASSERT_EQ(roots_by_tid.size(), static_cast<size_t>(kThreads));
  std::set<std::string> all_roots;
  for (const auto& [tid, roots] : roots_by_tid) {
    EXPECT_EQ(roots.size(), 1u) << "thread " << tid << " mixes models";
    all_roots.insert(*roots.begin());
  }
  EXPECT_EQ(all_roots.size(), static_cast<size_t>(kThreads));
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_EQ(addmm_backward_by_root["Net" + std::to_string(i)], 3 * 6) << i;  // 6 Linears, 3 steps
  }
}

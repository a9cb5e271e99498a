// The per-module memory numbers of the summary (exporters/memory_stats.h) and the memory events'
// JSON (exporters/memory_json.h), from hand-made reports.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "exporters/memory_json.h"
#include "exporters/memory_stats.h"

using namespace fqntrace;

namespace {
constexpr int kFwd = 0, kBwd = 1;
const std::string kNet = "Net", kFc = "Net.fc", kAct = "Net.act", kGlobal = "Global";
}  // namespace

// A block allocated in forward and freed in backward was kept for backward: an activation of the
// module that allocated it (and of its parents' totals, which the summary adds up).
TEST(MemoryStatsTest, ForwardBlocksFreedInBackwardAreActivations) {
  MemoryStats s;
  s.sample(1, kFc, kFwd, 0x10, 100);   // Linear's output: freed in forward
  s.sample(1, kAct, kFwd, 0x20, 100);  // ReLU's output: kept
  s.sample(1, kNet, kFwd, 0x10, -100);
  s.sample(1, kAct, kBwd, 0x20, -100);
  s.finish();
  EXPECT_EQ(s.find(kAct, kFwd)->activation, 100u);
  EXPECT_EQ(s.find(kFc, kFwd)->activation, 0u);
  EXPECT_EQ(s.find(kNet, kFwd)->freed, 100u);
  EXPECT_EQ(s.find(kAct, kBwd)->freed, 100u);
}

// A free whose allocation was never reported (made before tracing) counts as freed and is never
// taken from a run's live bytes: no negative numbers.
TEST(MemoryStatsTest, UnknownFreesNeverGoNegative) {
  MemoryStats s;
  s.sample(1, kFc, kFwd, 0x10, 64);
  s.sample(1, kFc, kFwd, 0x99, -4096);
  s.sample(1, kFc, kFwd, 0x20, 32);
  s.finish();
  EXPECT_EQ(s.find(kFc, kFwd)->freed, 4096u);
  EXPECT_EQ(s.find(kFc, kFwd)->peak, 96u);
  EXPECT_EQ(s.find(kNet, kFwd)->peak, 96u);  // the parent's run covers its child's reports
}

// A run ends with the module's range or with a report outside the module: the peak is the most
// live bytes within one run, not across calls.
TEST(MemoryStatsTest, PeakIsPerRun) {
  MemoryStats s;
  for (int call = 0; call < 3; ++call) {
    s.sample(1, kFc, kFwd, 0x100 + call, 50);
    s.module_end(1, kFc, kFwd);  // its output outlives the call
  }
  s.sample(1, kGlobal, kFwd, 0x200, 8);
  s.finish();
  EXPECT_EQ(s.find(kFc, kFwd)->peak, 50u);
  EXPECT_EQ(s.find(kNet, kFwd)->peak, 150u);  // Net's run spans the three calls
}

// Backward allocations that outlive backward are the gradients kept in .grad.
TEST(MemoryStatsTest, BackwardBlocksThatOutliveBackwardAreGradients) {
  MemoryStats s;
  s.sample(1, kFc, kBwd, 0x10, 40);   // weight gradient: kept
  s.sample(1, kFc, kBwd, 0x20, 16);   // a temporary
  s.sample(1, kFc, kBwd, 0x20, -16);
  s.finish();
  EXPECT_EQ(s.find(kFc, kBwd)->grad, 40u);
  EXPECT_EQ(s.find(kFc, kBwd)->alloc, 56u);
}

// Frees on another thread never touch this thread's runs.
TEST(MemoryStatsTest, ThreadsKeepTheirOwnRuns) {
  MemoryStats s;
  s.sample(1, kFc, kFwd, 0x10, 10);
  s.sample(2, kFc, kFwd, 0x20, 20);
  s.sample(2, kFc, kFwd, 0x10, -10);
  s.sample(1, kFc, kFwd, 0x30, 10);
  s.finish();
  EXPECT_EQ(s.find(kFc, kFwd)->peak, 20u);
}

TEST(MemoryJsonTest, DeviceLabels) {
  EXPECT_EQ(json::device_label(0, -1), "cpu");
  EXPECT_EQ(json::device_label(1, 3), "cuda:3");
  EXPECT_EQ(json::device_label(12, 0), "xpu:0");
}

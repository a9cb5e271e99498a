// Backward and recompute module spans (drain/module_spans.h) from a thread's events in the order
// the ring gives them (end order): which spans, at which times and levels, on which track.
#include "drain/module_spans.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "buffer/intern.h"

using namespace fqntrace;

namespace {

constexpr uint32_t kTid = 77;

struct Seen {
  std::string fqn;
  Phase phase;
  uint8_t level;
  uint64_t start, end;
  uint32_t track;
  std::string name;
  uint64_t node_ns;
};

class Spans {
 public:
  explicit Spans(bool from_nodes = false)
      : spans_(
            [this](const ModuleSpan& s) {
              const InternTable& names = InternTable::instance();
              seen.push_back({names.str(s.raw.range.fqn_id), s.raw.phase, s.raw.depth, s.ts_ns,
                              s.ts_ns + s.dur_ns, s.track_tid, names.str(s.raw.range.name_id),
                              s.raw.range.module.node_ns});
            },
            from_nodes),
        thread_(spans_.thread(kTid)) {}

  // One event of the thread: [start, end) in ns.
  void event(EventKind kind, const std::string& fqn, Phase phase, uint8_t depth, uint64_t start,
             uint64_t end, uint8_t flags = 0) {
    RawEvent e{};
    e.kind = kind;
    e.phase = phase;
    e.depth = depth;
    e.flags = flags;
    e.range.seq = -1;
    e.range.fqn_id = InternTable::instance().intern(fqn);
    spans_.add(thread_, e, start, end);
  }
  void wrapper(const std::string& fqn, uint8_t depth, uint64_t start, uint64_t end) {
    event(EventKind::kEngineEval, fqn, Phase::kBackward, depth, start, end);
  }
  void node(const std::string& fqn, uint8_t depth, uint64_t start, uint64_t end, uint8_t flags) {
    event(EventKind::kNode, fqn, Phase::kBackward, depth, start, end, flags);
  }
  void op(uint8_t depth, uint64_t start, uint64_t end, Phase phase = Phase::kForward) {
    event(EventKind::kOp, "Global", phase, depth, start, end);
  }
  void close_all() { spans_.close_all(); }
  const Seen* find(const std::string& fqn, uint64_t start) const {
    for (const Seen& s : seen) {
      if (s.fqn == fqn && s.start == start) return &s;
    }
    return nullptr;
  }

  std::vector<Seen> seen;

 private:
  ModuleSpans spans_;
  ModuleSpans::Thread& thread_;
};

// Consecutive nodes of one module and of its submodules make one span per level, ended by the
// next forward op at their depth.
TEST(ModuleSpansTest, StretchOfNodesNestsByFqnLevel) {
  Spans s;
  s.wrapper("M.b.fc2", 0, 100, 200);
  s.wrapper("M.b.fc1", 0, 210, 300);
  s.wrapper("M.a", 0, 310, 400);
  EXPECT_EQ(s.seen.size(), 3u);  // M.b.fc2 at fc1's start, then M.b.fc1 and M.b at M.a's
  s.op(0, 1000, 1100);
  ASSERT_EQ(s.seen.size(), 5u);
  const Seen* m = s.find("M", 100);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->end, 400u);
  EXPECT_EQ(m->level, 0);
  EXPECT_EQ(m->phase, Phase::kBackward);
  EXPECT_EQ(m->track, kModuleTrackBit | kTid);
  EXPECT_EQ(m->name, "nn.Module: M");
  const Seen* b = s.find("M.b", 100);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->end, 300u);
  EXPECT_EQ(b->level, 1);
  ASSERT_NE(s.find("M.b.fc2", 100), nullptr);
  EXPECT_EQ(s.find("M.b.fc2", 100)->end, 200u);
  ASSERT_NE(s.find("M.b.fc1", 210), nullptr);
  EXPECT_EQ(s.find("M.b.fc1", 210)->level, 2);
  ASSERT_NE(s.find("M.a", 310), nullptr);
  EXPECT_EQ(s.find("M.a", 310)->end, 400u);
}

// A sampled trace: stretches of the outermost nodes at any depth (a picked wrapper puts its node
// one deeper), silent or not; each span carries its module's own nodes' time; a node inside a
// node is not counted again; a wrapper does not end it, a forward event does.
TEST(ModuleSpansTest, SampledTraceBuildsSpansFromNodesWithTheirTime) {
  Spans s(/*from_nodes=*/true);
  s.node("M.b.fc2", 0, 100, 180, kTopNode | kSilentNode);
  s.node("M.b.fc2", 1, 190, 200, kTopNode);
  s.wrapper("M.b.fc2", 0, 185, 205);
  s.node("M.b.fc2", 2, 220, 230, 0);  // inside the next node (reentrant): not its own element
  s.node("M.b", 0, 210, 260, kTopNode | kSilentNode);
  s.node("M.a", 0, 300, 400, kTopNode | kSilentNode);
  s.op(1, 500, 600, Phase::kBackward);  // an op of backward outside the nodes: no end
  s.op(0, 1000, 1100);                  // the next forward ends the stretch
  std::vector<std::pair<std::string, uint64_t>> got;
  for (const Seen& x : s.seen) got.push_back({x.fqn, x.node_ns});
  std::vector<std::pair<std::string, uint64_t>> want = {
      {"M.b.fc2", 90}, {"M.b", 50}, {"M.a", 100}, {"M", 0}};
  EXPECT_EQ(got, want);
  EXPECT_EQ(s.find("M", 100)->end, 400u);
  EXPECT_EQ(s.find("M.b", 100)->end, 260u);
}

// Ops inside a wrapper (deeper, written before it) do not end the stretch; a Global node ends
// the module levels but makes no span.
TEST(ModuleSpansTest, NestedOpsKeepTheStretchGlobalNodesBreakIt) {
  Spans s;
  s.op(2, 110, 150, Phase::kBackward);
  s.wrapper("M.x", 0, 100, 200);
  s.op(1, 220, 260, Phase::kBackward);
  s.wrapper("M.x", 0, 210, 300);
  s.wrapper("Global", 0, 310, 320);
  s.wrapper("M.x", 0, 330, 400);
  s.close_all();
  std::vector<std::pair<std::string, uint64_t>> got;
  for (const Seen& x : s.seen) got.push_back({x.fqn, x.start});
  std::vector<std::pair<std::string, uint64_t>> want = {
      {"M.x", 100}, {"M", 100}, {"M.x", 330}, {"M", 330}};
  EXPECT_EQ(got, want);
  EXPECT_EQ(s.find("M", 100)->end, 300u);
}

// A backward run inside a node (a reentrant checkpoint's inner backward) is a stretch of its own,
// inside the outer node's time; the outer stretch goes on around it.
TEST(ModuleSpansTest, InnerBackwardIsItsOwnStretchInsideTheOuterNode) {
  Spans s;
  s.wrapper("M.a", 0, 100, 200);
  s.event(EventKind::kModule, "M.b", Phase::kRecompute, 2, 210, 260);  // the re-run forward
  s.wrapper("M.b.fc", 2, 270, 300);
  s.wrapper("M.b.act", 2, 300, 320);
  s.wrapper("M.b", 0, 205, 400);  // CheckpointFunctionBackward, around all of the above
  s.op(0, 500, 600);
  const Seen* recompute = s.find("M.b", 210);
  ASSERT_NE(recompute, nullptr);
  EXPECT_EQ(recompute->phase, Phase::kRecompute);
  EXPECT_EQ(recompute->end, 260u);
  EXPECT_EQ(recompute->level, 1);
  ASSERT_NE(s.find("M.b.fc", 270), nullptr);
  ASSERT_NE(s.find("M.b.act", 300), nullptr);
  const Seen* inner_b = s.find("M.b", 270);  // the inner stretch's own M.b level
  ASSERT_NE(inner_b, nullptr);
  EXPECT_EQ(inner_b->end, 320u);
  const Seen* outer_b = s.find("M.b", 205);
  ASSERT_NE(outer_b, nullptr);
  EXPECT_EQ(outer_b->end, 400u);
  const Seen* m = s.find("M", 100);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->end, 400u);
  // Every span of the inner stretch lies inside the outer node's span.
  for (const Seen& x : s.seen) {
    if (x.start >= 205 && x.start < 400) {
      EXPECT_LE(x.end, 400u) << x.fqn;
    }
  }
}

// An autograd device thread runs only nodes: an idle gap ends the stretch (the next backward).
TEST(ModuleSpansTest, IdleGapEndsTheStretch) {
  Spans s;
  s.wrapper("M.a", 0, 100, 200);
  s.wrapper("M.a", 0, 200 + kIdleGapNs + 1, 300 + kIdleGapNs);
  s.close_all();
  ASSERT_EQ(s.seen.size(), 4u);
  EXPECT_EQ(s.find("M.a", 100)->end, 200u);
  EXPECT_EQ(s.find("M", 100)->end, 200u);
  EXPECT_NE(s.find("M.a", 200 + kIdleGapNs + 1), nullptr);
}

// Forward ranges with nothing open cost nothing and make nothing.
TEST(ModuleSpansTest, ForwardAloneMakesNoSpan) {
  Spans s;
  s.op(1, 100, 200);
  s.event(EventKind::kModule, "M", Phase::kForward, 0, 50, 300);
  s.close_all();
  EXPECT_TRUE(s.seen.empty());
}

}  // namespace

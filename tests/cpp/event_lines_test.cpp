// The drain's cached line writer (exporters/event_lines.h) against the reference
// (json::append_event): byte for byte the same text, on every event of the benchmark's mix, with
// shapes, hostile names, collectives, and after the cache has started over.
#include "exporters/event_lines.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "buffer/intern.h"
#include "drain/module_spans.h"
#include "exporters/json_text.h"
#include "exporters/module_span_json.h"
#include "tests/support/event_mix.h"

using namespace fqntrace;

namespace {

constexpr long kPid = 4242;

// Both writers, fed the same records with the same separator, must write the same text.
class Both {
 public:
  explicit Both(const char* separator) : separator_(separator), lines_(kPid) {}
  void add(const EventRecord& e) {
    json::append_event(expected_, e, kPid, separator_, &first_expected_);
    lines_.append(actual_, e, separator_, &first_actual_);
  }
  const std::string& expected() const { return expected_; }
  const std::string& actual() const { return actual_; }

 private:
  const char* separator_;
  json::EventLines lines_;
  std::string expected_, actual_;
  bool first_expected_ = true, first_actual_ = true;
};

const std::string kNone;

// A record as the Drainer makes it, with made-up flow numbers for nodes that have a source.
void add_raw(Both& both, const RawEvent& raw, uint32_t tid, uint64_t n,
             const std::string* dims = nullptr, const std::string* types = nullptr) {
  const InternTable& names = InternTable::instance();
  const Range& r = raw.range;
  bool flow = raw.kind == EventKind::kNode && r.node.flow_src_ns != 0;
  EventRecord e{raw,
                tid,
                names.str(r.name_id),
                names.str(r.fqn_id),
                raw.kind == EventKind::kModule ? names.str(r.module.type_id) : kNone,
                raw.kind == EventKind::kCollective ? names.str(r.collective.kind_name_id) : kNone,
                r.start_ns,
                r.end_ns - r.start_ns,
                flow ? n + 1 : 0,
                flow ? r.node.flow_src_ns : 0,
                dims,
                types};
  both.add(e);
}

RawEvent op(const std::string& name, const std::string& fqn, uint8_t depth, int64_t seq) {
  RawEvent e{};
  e.kind = EventKind::kOp;
  e.phase = Phase::kForward;
  e.depth = depth;
  e.range.start_ns = 1'000'123;
  e.range.end_ns = 1'004'567;
  e.range.seq = seq;
  e.range.name_id = InternTable::instance().intern(name);
  e.range.fqn_id = InternTable::instance().intern(fqn);
  return e;
}

}  // namespace

TEST(EventLinesTest, WritesWhatAppendEventWritesForTheWholeMix) {
  mix::EventMix m;
  for (const char* separator : {",\n", "\n"}) {
    Both both(separator);
    uint64_t n = 0;
    for (uint64_t k = 0; k < 3; ++k) {
      for (const auto& me : m.step())
        add_raw(both, m.at_step(me.raw, k), mix::EventMix::tid(me.thread), n++);
    }
    ASSERT_GT(both.expected().size(), 100000u);
    EXPECT_EQ(both.actual(), both.expected());
  }
}

TEST(EventLinesTest, ShapesHostileNamesAndEveryPhase) {
  Both both(",\n");
  const std::string dims = "[[3], [5, 4]]", types = "[\"float\", \"float\"]";
  uint64_t n = 0;
  for (const char* name : {"aten::add", "weird\"op\\name\n", "Модель \xff bad"}) {
    for (Phase phase : {Phase::kForward, Phase::kBackward, Phase::kRecompute}) {
      RawEvent e = op(name, std::string("Model.\"x\".") + name, 3, n % 2 ? -1 : 77);
      e.phase = phase;
      e.range.op.flops = n % 3 ? 0 : 123456789;
      e.range.op.alloc_bytes = n % 2 ? 0 : 4096 * (n + 1);  // FQNTRACE_MEMORY's per-op bytes
      add_raw(both, e, 17, n++);
      add_raw(both, e, 18, n++, &dims, &types);  // another thread: another cached head
      RawEvent profiled = e;  // while torch.profiler records: the RecordFunction's handle
      profiled.range.rf_id = 1234567890123ull + n;
      add_raw(both, profiled, 17, n++);
      RawEvent module = e;
      module.kind = EventKind::kModule;
      module.range.module.type_id = InternTable::instance().intern("Weird\"Type");
      add_raw(both, module, 17, n++);
      module.flags |= kHasCpu;  // its own CPU time (plugin/thread_cpu.h), saturated too
      module.self_cpu = n % 2 ? 12345 : UINT32_MAX;
      add_raw(both, module, 17, n++);
      RawEvent wrapper = e;  // an outermost backward op with its CPU time
      wrapper.kind = EventKind::kEngineEval;
      wrapper.flags = kTopOp | kHasCpu;
      wrapper.self_cpu = 0;
      add_raw(both, wrapper, 17, n++);
      RawEvent coll = e;
      coll.kind = EventKind::kCollective;
      coll.range.collective = {4096, 2, InternTable::instance().intern("allreduce")};
      coll.flags |= kCollectiveWork | kCollectiveUserScope;
      add_raw(both, coll, 17, n++);
    }
  }
  EXPECT_EQ(both.actual(), both.expected());
}

// More combinations than the cache keeps: it starts over and still writes the same text.
TEST(EventLinesTest, StartsOverWhenNamesNeverRepeat) {
  Both both("\n");
  for (uint64_t i = 0; i < 70000; ++i) {
    add_raw(both, op("step " + std::to_string(i), "Global", 0, -1), 5, i);
  }
  EXPECT_EQ(both.actual(), both.expected());
}

// Backward and recompute module spans: the cached writer against json::append_module_span, spans
// interleaved with ops (the separator and the cache are shared), with and without a module type,
// hostile names, on two module tracks.
TEST(EventLinesTest, ModuleSpansAsAppendModuleSpanWritesThem) {
  InternTable& names = InternTable::instance();
  const char* separator = ",\n";
  json::EventLines lines(kPid);
  std::string expected, actual;
  bool first_expected = true, first_actual = true;
  uint64_t n = 0;
  for (const char* fqn : {"Model", "Model.layers.0", "Модель.\"x\"\n", "Model.layers.0"}) {
    for (const char* type : {"", "Linear", "Weird\"Type"}) {
      for (Phase phase : {Phase::kBackward, Phase::kRecompute}) {
        for (uint32_t track : {kModuleTrackBit | 17u, kModuleTrackBit | 18u}) {
          RawEvent span{};
          span.kind = EventKind::kModuleSpan;
          span.phase = phase;
          span.depth = static_cast<uint8_t>(n % 4);
          span.range.seq = -1;
          span.range.fqn_id = names.intern(fqn);
          span.range.name_id = names.intern(std::string("nn.Module: ") + fqn);
          span.range.module.type_id = names.intern(type);
          EventRecord e{span,
                        track,
                        names.str(span.range.name_id),
                        names.str(span.range.fqn_id),
                        names.str(span.range.module.type_id),
                        kNone,
                        1'000'123 + 7'777 * n,
                        n * 1'234'567,
                        0,
                        0};
          json::append_module_span(expected, e, kPid, separator, &first_expected);
          lines.append(actual, e, separator, &first_actual);
          RawEvent between = op("aten::mm", fqn, 2, static_cast<int64_t>(n));  // an op in between
          EventRecord o{between,
                        17,
                        names.str(between.range.name_id),
                        names.str(between.range.fqn_id),
                        kNone,
                        kNone,
                        2'000'000 + n,
                        999,
                        0,
                        0};
          json::append_event(expected, o, kPid, separator, &first_expected);
          lines.append(actual, o, separator, &first_actual);
          ++n;
        }
      }
    }
  }
  ASSERT_NE(expected.find("\"module_type\":\"Weird\\\"Type\""), std::string::npos);
  EXPECT_EQ(actual, expected);
}

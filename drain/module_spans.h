// Backward and recompute module spans, built on the drain thread from the events it already
// has. Forward module spans are ranges the module hooks open; backward has no such range: the
// engine runs one node after another, each attributed to the module whose forward created it.
// Here each stretch of consecutive engine wrappers ("autograd::engine::evaluate_function: X",
// one per node) becomes nested spans, one per level of its fqn ("Model", "Model.layers",
// "Model.layers.0", ...) as long as the next wrapper keeps that prefix; recompute module ranges
// (activation checkpointing re-running a forward) are copied as they are. The spans go to a
// track of their own per thread (tid kModuleTrackBit | tid), so they never break the nesting of
// the thread's ranges.
//
// Events arrive per thread in end order (an enclosing range after what it encloses). Wrappers
// at one depth follow each other; a wrapper inside another (a reentrant backward under a
// checkpointed node) is deeper and is built as a stretch of its own, inside the outer wrapper's
// time. A stretch ends at an event at its depth or above that is not a wrapper (the forward of
// the next step, an optimizer op, a range around the backward), or when the thread was idle for
// more than kIdleGapNs between two wrappers (an autograd device thread runs nothing else).
//
// A sampled trace (FQNTRACE_SAMPLE < 1) has few wrappers (they are ops) but every node: there the
// stretches are made of the nodes that no node encloses (kTopNode), whatever their depth (it
// depends on whether their wrapper was picked), and a stretch ends at a forward event or an idle
// gap. Each span then also carries the time of its module's own nodes inside it (node_ns), the
// nodes not written (kSilentNode) included: a sampled trace's backward time per module.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "buffer/event.h"

namespace fqntrace {

constexpr uint32_t kModuleTrackBit = 0x40000000;  // above any Linux tid (pid_max <= 2^22)
constexpr uint64_t kIdleGapNs = 1000000;

// A span ready to be written: a kModuleSpan event (range.fqn_id, name_id, module.type_id, phase,
// depth = its level on the track) and its times in ns relative to the trace's origin.
struct ModuleSpan {
  RawEvent raw;
  uint32_t track_tid;
  uint64_t ts_ns;
  uint64_t dur_ns;
};

class ModuleSpans {
 public:
  using Sink = std::function<void(const ModuleSpan&)>;
  explicit ModuleSpans(Sink sink, bool from_nodes = false)
      : sink_(std::move(sink)), from_nodes_(from_nodes) {}

  struct Run;
  struct Thread {
    uint32_t tid = 0;
    std::vector<Run> runs;  // open stretches, the outermost (smallest depth) first
  };
  // The state of one thread, found once per buffer drained.
  Thread& thread(uint32_t tid);
  // Every range of that thread, in the order its ring gives them; times relative to the origin.
  void add(Thread& t, const RawEvent& e, uint64_t ts_ns, uint64_t end_ns) {
    if (from_nodes_) {
      add_from_nodes(t, e, ts_ns, end_ns);
      return;
    }
    if (t.runs.empty() && e.kind != EventKind::kEngineEval &&
        !(e.kind == EventKind::kModule && e.phase == Phase::kRecompute)) {
      return;  // the common case: forward ops, nothing open on the module track
    }
    add_slow(t, e, ts_ns, end_ns);
  }
  // A module forward (kModule event): remembers its class for the spans of its fqn.
  void module_seen(uint32_t fqn_id, uint32_t type_id) {
    if (type_id != 0 && (last_type_fqn_ != fqn_id)) learn_type(fqn_id, type_id);
  }
  // Ends every open stretch (flush and the end of the session): everything is written.
  void close_all();

  struct Open {
    uint32_t fqn_id;
    uint32_t name_id;
    uint64_t start_ns;
    uint64_t node_ns;  // sampled: the time of this level's own nodes so far
  };
  struct Run {
    uint8_t depth;
    uint64_t last_end_ns;
    std::vector<Open> open;  // the open spans, outermost first: prefixes of one fqn
  };

 private:
  struct Level {
    uint32_t fqn_id;
    uint32_t name_id;  // "nn.Module: <fqn>"
  };
  void add_slow(Thread& t, const RawEvent& e, uint64_t ts_ns, uint64_t end_ns);
  void add_from_nodes(Thread& t, const RawEvent& e, uint64_t ts_ns, uint64_t end_ns);
  void extend(Thread& t, Run& run, uint32_t fqn_id, uint64_t ts_ns, uint64_t end_ns);
  void copy_recompute(Thread& t, const RawEvent& e, uint64_t ts_ns, uint64_t end_ns);
  void learn_type(uint32_t fqn_id, uint32_t type_id);
  const std::vector<Level>& chain(uint32_t fqn_id);
  void close_above(Thread& t, uint8_t depth);  // ends the runs at `depth` and deeper
  void end_run(Thread& t, Run& run, size_t keep);
  void emit(uint32_t tid, uint32_t fqn_id, uint32_t name_id, Phase phase, uint8_t level,
            uint64_t start_ns, uint64_t end_ns, uint64_t node_ns = 0);

  Sink sink_;
  const bool from_nodes_;
  std::unordered_map<uint32_t, Thread> threads_;
  std::unordered_map<uint32_t, std::vector<Level>> chains_;  // fqn id → its prefixes' levels
  std::unordered_map<uint32_t, uint32_t> types_;             // fqn id → class name id
  std::unordered_map<uint32_t, uint32_t> names_;             // fqn id → "nn.Module: <fqn>" id
  uint32_t last_type_fqn_ = 0;
};

}  // namespace fqntrace

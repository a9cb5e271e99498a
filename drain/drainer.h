// The drain: moves events from the per-thread rings to the exporters, on one thread at a time.
// Per event it converts ticks to monotonic ns (tick_converter.h), joins the op's shapes chunks
// (shapes_assembler.h), resolves interned ids to strings, makes times relative to the trace's
// origin, numbers fwdbwd flows, and hands the EventRecord to every exporter. The session owns one
// and calls it from its drain thread; bench/exporter_bench and its test drive the same code.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "buffer/buffer_registry.h"
#include "buffer/module_table.h"
#include "drain/device_events.h"
#include "drain/module_spans.h"
#include "drain/rf_attribution.h"
#include "drain/tick_converter.h"
#include "exporters/exporter.h"

namespace fqntrace {

class Drainer {
 public:
  // `exporters` are open; `mono_origin_ns` is TraceInfo::mono_origin_ns; `shapes`: kShapes
  // chunks are reassembled into the ops' input shapes (else they are skipped). `module_spans`:
  // build the backward and recompute module spans (off only in the exporter benchmark's
  // comparison of their cost). `sampled` (FQNTRACE_SAMPLE < 1): the spans are built from the
  // autograd nodes, which are complete, and carry their time; silent nodes (kSilentNode) feed
  // the spans and are not written.
  Drainer(std::vector<std::unique_ptr<Exporter>> exporters, uint64_t mono_origin_ns, bool shapes,
          bool module_spans = true, bool sampled = false);

  // Session start, before the first event is recorded: the tick map's first measurement.
  void start_clock() { ticks_.start(); }
  // Before each round over the buffers: re-measures the tick map when due, and hands the
  // modules named since the last round (buffer/module_table.h) to the exporters, so a module's
  // entry precedes the events of its first call.
  void begin_batch() {
    ticks_.recalibrate_if_due();
    declare_new_modules();
  }
  // Every event published in `buffer` so far; names the thread first if this drainer has not.
  // Returns the events handed to the exporters.
  uint64_t drain(ThreadBuffer& buffer);
  // The same, each event sent where `route` says: bit 1 this drainer, bit 2 `other` (a capture's
  // drainer, docs/on-demand.md), none: dropped. Shapes are joined once for both.
  using Route = std::function<unsigned(const RawEvent&)>;
  uint64_t drain_routed(ThreadBuffer& buffer, Drainer* other, const Route& route);

  // FQNTRACE_DEVICE: one device event (times made relative to `base_time_ns`, the trace's
  // origin), on its stream's track, named the first time; then the recording's counts (DeviceUse).
  void device_event(const DeviceEvent& e, uint64_t base_time_ns);
  void device_recording(const DeviceCounts& counts) {
    ++device_.recordings;
    device_.not_attributed += counts.not_attributed;
    device_.ops += counts.ops;
    device_.ops_joined += counts.ops_joined;
  }

  // false (with *error) when an exporter could not write: from then on events are discarded.
  bool flush(std::string* error);
  // Completes every output (its tail says what `device` says); the errors of those that failed
  // (empty when all succeeded).
  std::vector<std::string> finish(uint64_t dropped_events, const DeviceUse& device = {});
  void process_group_known(const TraceInfo& group);
  // Renames each output to the path at its index; the errors of those left where they were.
  std::vector<std::string> move_outputs(const std::vector<std::string>& paths);
  void fail() { failed_ = true; }
  bool failed() const { return failed_; }
  uint64_t events_written() const { return events_written_; }
  // (RecordFunction handle → attribution) of the ranges drained while torch.profiler recorded.
  RfAttribution& rf_attribution() { return rf_; }

 private:
  // false: the event was not written (a silent node, which only feeds the spans).
  bool deliver(const RawEvent& raw, uint32_t tid, bool shaped, ModuleSpans::Thread& spans);
  // Names the buffer's thread to the exporters the first time this drainer delivers from it.
  void announce(const ThreadBuffer& buffer);
  // drain() and drain_routed(): `route(e)` as drain_routed's, inlined for drain()'s constant 1.
  template <typename RouteFn>
  uint64_t drain_to(ThreadBuffer& buffer, Drainer* other, const RouteFn& route);
  void deliver_span(const ModuleSpan& span);
  void declare_new_modules();

  std::vector<std::unique_ptr<Exporter>> exporters_;
  const uint64_t origin_ns_;
  const bool shapes_;
  const bool module_spans_;
  TickConverter ticks_;
  uint64_t next_flow_id_ = 0;
  uint64_t events_written_ = 0;
  bool failed_ = false;
  std::string dims_json_, types_json_;  // scratch for the current op's shapes
  ModuleSpans spans_;
  std::vector<uint32_t> span_tracks_;  // module tracks already named
  RfAttribution rf_;
  std::set<std::pair<uint32_t, std::string>> announced_;  // threads named, by (tid, name)
  std::set<uint32_t> device_tracks_;                      // device stream tracks already named
  DeviceUse device_;                      // FQNTRACE_DEVICE's counts for this drainer's files
  size_t modules_declared_ = 0;           // entries of the module table already exported
  std::vector<ModuleEntry> new_modules_;  // scratch
};

}  // namespace fqntrace

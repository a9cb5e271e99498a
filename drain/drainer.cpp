#include "drain/drainer.h"

#include "buffer/intern.h"
#include "drain/shapes_assembler.h"

namespace fqntrace {

Drainer::Drainer(std::vector<std::unique_ptr<Exporter>> exporters, uint64_t mono_origin_ns,
                 bool shapes, bool module_spans, bool sampled)
    : exporters_(std::move(exporters)),
      origin_ns_(mono_origin_ns),
      shapes_(shapes),
      module_spans_(module_spans),
      spans_([this](const ModuleSpan& span) { deliver_span(span); }, sampled) {}

void Drainer::announce(const ThreadBuffer& b) {
  if (!announced_.emplace(b.os_tid, b.thread_name).second) return;
  std::string label = "thread " + std::to_string(b.os_tid) +
                      (b.thread_name.empty() ? "" : " (" + b.thread_name + ")");
  for (auto& ex : exporters_) ex->thread_seen(b.os_tid, label);
}

namespace {

shapes::Assembler* assembler_of(ThreadBuffer& b) {
  if (!b.drain_state) b.drain_state = std::make_shared<shapes::Assembler>();
  return static_cast<shapes::Assembler*>(b.drain_state.get());
}

}  // namespace

template <typename RouteFn>
uint64_t Drainer::drain_to(ThreadBuffer& b, Drainer* other, const RouteFn& route) {
  shapes::Assembler* assembler = shapes_ ? assembler_of(b) : nullptr;
  ModuleSpans::Thread* spans = nullptr;
  ModuleSpans::Thread* other_spans = nullptr;
  uint64_t delivered = 0;
  b.ring.drain([&](const RawEvent& e) {
    if (e.kind == EventKind::kShapes) {
      if (assembler != nullptr) assembler->add_chunk(e);
      return;
    }
    bool shaped = assembler != nullptr && e.kind == EventKind::kOp &&
                  assembler->take(e.depth, &dims_json_, &types_json_);
    unsigned to = route(e);
    if ((to & 1) != 0 && !failed_) {
      if (spans == nullptr) {
        announce(b);
        spans = &spans_.thread(b.os_tid);
      }
      if (deliver(e, b.os_tid, shaped, *spans)) ++delivered;
    }
    if ((to & 2) != 0 && other != nullptr && !other->failed_) {
      if (other_spans == nullptr) {
        other->announce(b);
        other_spans = &other->spans_.thread(b.os_tid);
      }
      if (shaped) {
        other->dims_json_ = dims_json_;
        other->types_json_ = types_json_;
      }
      if (other->deliver(e, b.os_tid, shaped, *other_spans)) ++other->events_written_;
    }
  });
  events_written_ += delivered;
  return delivered;
}

uint64_t Drainer::drain(ThreadBuffer& b) {
  return drain_to(b, nullptr, [](const RawEvent&) { return 1u; });
}

uint64_t Drainer::drain_routed(ThreadBuffer& b, Drainer* other, const Route& route) {
  return drain_to(b, other, route);
}

bool Drainer::deliver(const RawEvent& raw, uint32_t tid, bool shaped, ModuleSpans::Thread& spans) {
  static const std::string kNone;
  const InternTable& names = InternTable::instance();
  if (raw.kind == EventKind::kMemory) {
    static const std::string kMemoryName = "[memory]";  // Kineto's name for the same reports
    uint64_t ts = ticks_.to_ns(raw.memory.ts);
    EventRecord record{raw,
                       tid,
                       kMemoryName,
                       names.str(raw.memory.fqn_id),
                       kNone,
                       kNone,
                       ts > origin_ns_ ? ts - origin_ns_ : 0,
                       0,
                       0,
                       0};
    for (const auto& ex : exporters_) ex->event(record);
    return true;
  }
  const Range& r = raw.range;
  // Callbacks stamp ticks; everything past this point sees monotonic ns.
  uint64_t start_ns = ticks_.to_ns(r.start_ns);
  uint64_t end_ns = ticks_.to_ns(r.end_ns);
  if (raw.kind == EventKind::kNode && (raw.flags & kSilentNode) != 0) {
    uint64_t ts = start_ns > origin_ns_ ? start_ns - origin_ns_ : 0;
    if (module_spans_) spans_.add(spans, raw, ts, ts + (end_ns > start_ns ? end_ns - start_ns : 0));
    return false;
  }
  uint64_t flow_id = 0;
  uint64_t flow_src_ts = 0;
  if (raw.kind == EventKind::kNode && r.node.flow_src_ns != 0) {
    uint64_t flow_src_ns = ticks_.to_ns(r.node.flow_src_ns);
    if (flow_src_ns >= origin_ns_ && flow_src_ns != 0) {
      flow_id = ++next_flow_id_;
      flow_src_ts = flow_src_ns - origin_ns_;
    }
  }
  EventRecord record{
      raw,
      tid,
      names.str(r.name_id),
      names.str(r.fqn_id),
      raw.kind == EventKind::kModule ? names.str(r.module.type_id) : kNone,
      raw.kind == EventKind::kCollective ? names.str(r.collective.kind_name_id) : kNone,
      start_ns > origin_ns_ ? start_ns - origin_ns_ : 0,
      end_ns > start_ns ? end_ns - start_ns : 0,
      flow_id,
      flow_src_ts,
      shaped ? &dims_json_ : nullptr,
      shaped ? &types_json_ : nullptr};
  for (const auto& ex : exporters_) ex->event(record);
  if (raw.kind == EventKind::kModule) spans_.module_seen(r.fqn_id, r.module.type_id);
  if (r.rf_id != 0) {
    rf_.add({r.rf_id, r.fqn_id, raw.kind == EventKind::kModule ? r.module.type_id : 0, raw.phase});
  }
  if (module_spans_) spans_.add(spans, raw, record.ts_ns, record.ts_ns + record.dur_ns);
  return true;
}

void Drainer::deliver_span(const ModuleSpan& span) {
  static const std::string kNone;
  const InternTable& names = InternTable::instance();
  bool named = false;
  for (uint32_t t : span_tracks_) named = named || t == span.track_tid;
  if (!named) {
    span_tracks_.push_back(span.track_tid);
    std::string label = "thread " + std::to_string(span.track_tid) + " (modules in backward of " +
                        std::to_string(span.track_tid & ~kModuleTrackBit) + ")";
    for (auto& ex : exporters_) ex->thread_seen(span.track_tid, label);
  }
  const Range& r = span.raw.range;
  EventRecord record{span.raw,
                     span.track_tid,
                     names.str(r.name_id),
                     names.str(r.fqn_id),
                     names.str(r.module.type_id),
                     kNone,
                     span.ts_ns,
                     span.dur_ns,
                     0,
                     0};
  for (const auto& ex : exporters_) ex->event(record);
  ++events_written_;
}

void Drainer::declare_new_modules() {
  if (failed_) return;
  new_modules_.clear();
  modules_declared_ = ModuleTable::instance().read_from(modules_declared_, &new_modules_);
  const InternTable& names = InternTable::instance();
  for (const ModuleEntry& m : new_modules_) {
    for (auto& ex : exporters_) {
      ex->module_declared(names.str(m.fqn_id), names.str(m.type_id), names.str(m.parent_id));
    }
  }
}

bool Drainer::flush(std::string* error) {
  if (failed_) return true;  // already reported
  for (auto& ex : exporters_) {
    if (!ex->flush(error)) {
      failed_ = true;
      return false;
    }
  }
  return true;
}

void Drainer::device_event(const DeviceEvent& e, uint64_t base_time_ns) {
  if (failed_) return;
  uint32_t tid = device_track_tid(e);
  if (device_tracks_.insert(tid).second) {
    std::string label = device_track_name(e);
    for (auto& ex : exporters_) ex->thread_seen(tid, label);
  }
  uint64_t ts = e.wall_ns > base_time_ns ? e.wall_ns - base_time_ns : 0;
  DeviceEventRecord r{e.cat,    e.name, tid,     e.device,      e.stream,     ts,
                      e.dur_ns, e.fqn,  e.phase, e.correlation, e.external_id};
  for (auto& ex : exporters_) ex->device_event(r);
  ++events_written_;
  ++device_.collected;
}

std::vector<std::string> Drainer::finish(uint64_t dropped_events, const DeviceUse& device) {
  if (!failed_) spans_.close_all();  // stretches still open end with the session
  FinishInfo fin;
  fin.dropped_events = dropped_events;
  fin.events_written = events_written_;
  fin.device = device;
  fin.device.collect |= device_.recordings != 0;  // events handed over say so, asked or not
  fin.device.recordings = device_.recordings;
  fin.device.collected = device_.collected;
  fin.device.not_attributed = device_.not_attributed;
  fin.device.ops = device_.ops;
  fin.device.ops_joined = device_.ops_joined;
  std::vector<std::string> errors;
  for (auto& ex : exporters_) {
    std::string error;
    if (!ex->finish(fin, &error)) errors.push_back(error);
  }
  if (!errors.empty()) failed_ = true;
  return errors;
}

void Drainer::process_group_known(const TraceInfo& group) {
  for (auto& ex : exporters_) ex->process_group_known(group);
}

std::vector<std::string> Drainer::move_outputs(const std::vector<std::string>& paths) {
  std::vector<std::string> errors;
  for (size_t i = 0; i < exporters_.size() && i < paths.size(); ++i) {
    std::string error;
    if (!exporters_[i]->move_to(paths[i], &error)) errors.push_back(error);
  }
  return errors;
}

}  // namespace fqntrace

#include "drain/module_spans.h"

#include "buffer/intern.h"

namespace fqntrace {

ModuleSpans::Thread& ModuleSpans::thread(uint32_t tid) {
  Thread& t = threads_[tid];
  t.tid = tid;
  return t;
}

void ModuleSpans::learn_type(uint32_t fqn_id, uint32_t type_id) {
  types_[fqn_id] = type_id;
  last_type_fqn_ = fqn_id;
}

// The levels of an fqn: "A.b.c" gives A, A.b, A.b.c (interned once per fqn); "Global" none.
const std::vector<ModuleSpans::Level>& ModuleSpans::chain(uint32_t fqn_id) {
  auto found = chains_.find(fqn_id);
  if (found != chains_.end()) return found->second;
  std::vector<Level>& levels = chains_[fqn_id];
  if (fqn_id == kGlobalFqnId || fqn_id == kEmptyNameId) return levels;
  InternTable& names = InternTable::instance();
  const std::string fqn = names.str(fqn_id);
  for (size_t dot = fqn.find('.');; dot = fqn.find('.', dot + 1)) {
    std::string prefix = fqn.substr(0, dot);
    uint32_t id = dot == std::string::npos ? fqn_id : names.intern(prefix);
    levels.push_back({id, names.intern("nn.Module: " + prefix)});
    if (dot == std::string::npos) break;
  }
  return levels;
}

void ModuleSpans::emit(uint32_t tid, uint32_t fqn_id, uint32_t name_id, Phase phase, uint8_t level,
                       uint64_t start_ns, uint64_t end_ns, uint64_t node_ns) {
  ModuleSpan s;
  s.raw = RawEvent{};
  s.raw.kind = EventKind::kModuleSpan;
  s.raw.range.seq = -1;
  s.raw.range.fqn_id = fqn_id;
  s.raw.range.name_id = name_id;
  auto type = types_.find(fqn_id);
  s.raw.range.module.type_id = type != types_.end() ? type->second : kEmptyNameId;
  s.raw.range.module.node_ns = node_ns;
  s.raw.phase = phase;
  s.raw.depth = level;
  s.track_tid = kModuleTrackBit | tid;
  s.ts_ns = start_ns;
  s.dur_ns = end_ns > start_ns ? end_ns - start_ns : 0;
  sink_(s);
}

// Closes the run's open spans beyond the first `keep`, innermost first (as ranges end).
void ModuleSpans::end_run(Thread& t, Run& run, size_t keep) {
  while (run.open.size() > keep) {
    const Open& o = run.open.back();
    emit(t.tid, o.fqn_id, o.name_id, Phase::kBackward, static_cast<uint8_t>(run.open.size() - 1),
         o.start_ns, run.last_end_ns, o.node_ns);
    run.open.pop_back();
  }
}

void ModuleSpans::close_above(Thread& t, uint8_t depth) {
  while (!t.runs.empty() && t.runs.back().depth >= depth) {
    end_run(t, t.runs.back(), 0);
    t.runs.pop_back();
  }
}

void ModuleSpans::copy_recompute(Thread& t, const RawEvent& e, uint64_t ts_ns, uint64_t end_ns) {
  const std::vector<Level>& levels = chain(e.range.fqn_id);
  if (!levels.empty()) {
    emit(t.tid, e.range.fqn_id, levels.back().name_id, Phase::kRecompute,
         static_cast<uint8_t>(levels.size() - 1), ts_ns, end_ns);
  }
}

// The next element of a stretch (a wrapper, or a node in a sampled trace) for module fqn_id.
void ModuleSpans::extend(Thread& t, Run& run, uint32_t fqn_id, uint64_t ts_ns, uint64_t end_ns) {
  const std::vector<Level>& levels = chain(fqn_id);
  size_t common = 0;
  while (common < run.open.size() && common < levels.size() &&
         run.open[common].fqn_id == levels[common].fqn_id) {
    ++common;
  }
  end_run(t, run, common);  // levels this element leaves end where the last one ended
  for (size_t i = common; i < levels.size(); ++i) {
    run.open.push_back({levels[i].fqn_id, levels[i].name_id, ts_ns, 0});
  }
  if (from_nodes_ && !levels.empty()) run.open[levels.size() - 1].node_ns += end_ns - ts_ns;
  run.last_end_ns = end_ns;
}

void ModuleSpans::add_slow(Thread& t, const RawEvent& e, uint64_t ts_ns, uint64_t end_ns) {
  if (e.kind != EventKind::kEngineEval || e.phase != Phase::kBackward) {
    close_above(t, e.depth);  // it ends after everything deeper; at its depth it follows them
    if (e.kind == EventKind::kModule && e.phase == Phase::kRecompute)
      copy_recompute(t, e, ts_ns, end_ns);
    return;
  }
  close_above(t, static_cast<uint8_t>(e.depth + 1));  // stretches inside this wrapper are done
  if (!t.runs.empty() && t.runs.back().last_end_ns + kIdleGapNs < ts_ns) close_above(t, e.depth);
  if (t.runs.empty() || t.runs.back().depth != e.depth) {
    t.runs.push_back(Run{e.depth, end_ns, {}});
  }
  extend(t, t.runs.back(), e.range.fqn_id, ts_ns, end_ns);
}

// Sampled: one stretch per thread, of the outermost nodes; a forward event ends it.
void ModuleSpans::add_from_nodes(Thread& t, const RawEvent& e, uint64_t ts_ns, uint64_t end_ns) {
  if (e.kind == EventKind::kNode && (e.flags & kTopNode) != 0 && e.phase == Phase::kBackward) {
    if (!t.runs.empty() && t.runs.back().last_end_ns + kIdleGapNs < ts_ns) close_above(t, 0);
    if (t.runs.empty()) t.runs.push_back(Run{0, end_ns, {}});
    extend(t, t.runs.back(), e.range.fqn_id, ts_ns, end_ns);
  } else if (e.phase == Phase::kForward) {
    close_above(t, 0);
  } else if (e.kind == EventKind::kModule && e.phase == Phase::kRecompute) {
    copy_recompute(t, e, ts_ns, end_ns);
  }
}

void ModuleSpans::close_all() {
  for (auto& entry : threads_) close_above(entry.second, 0);
}

}  // namespace fqntrace

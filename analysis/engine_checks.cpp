// validate's per-event, nesting, flow and span checks on the stream (Mode::kChecks):
// validate_rules._check_event and validate_stream._StreamChecks.
#include "analysis/engine_state.h"

namespace fqntrace::analysis {

// False: a problem, or something only the Python checks judge (checks->python).
bool SummaryEngine::State::check_event(const Event& e) {
  Checks& c = *checks;
  bool ok = e.ph_str && !e.odd_thread;
  if (ok && e.ph == 'X') {
    ok = e.name_is_str && e.ts.ok && e.dur.ok && !e.dur.negative() && e.has_pid && e.has_tid;
    if (ok && (e.cat == kCatCpuOp || e.cat == kCatUserAnnotation || e.cat == kCatModuleSpan))
      ok = e.args && e.fqn != kNone && !strings.str(e.fqn).empty() && e.phase < kPhases &&
           !(e.has_module_type && e.module_type == kNone);
    ok = ok && check_slice(e);
  } else if (ok && (e.ph == 's' || e.ph == 'f')) {
    ok = e.id_kind != 0 && e.ts.ok && e.has_pid && e.has_tid && check_flow(e);
  } else if (ok && e.ph == 'M') {
    ok = e.name_is_str;
    if (ok && e.name == module_entry) {
      ok = is_module_entry(e);
      if (ok) fqn_flags(e.fqn) |= Checks::kSpan;  // a module the trace knows, like a span
    }
  }
  if (!ok) c.python = true;
  return ok;
}

uint8_t& SummaryEngine::State::fqn_flags(uint32_t fqn) {
  auto& flags = checks->fqn_flags;
  if (flags.size() <= fqn) flags.resize(strings.size() + 1, 0);
  return flags[fqn];
}

bool SummaryEngine::State::check_slice(const Event& e) {
  Checks& c = *checks;
  int64_t start = e.ts.ns();
  int64_t end = start + e.dur.ns();
  if (e.cat == kCatCpuOp) {
    uint8_t& flags = fqn_flags(e.fqn);
    if (flags == 0 && e.fqn != global_fqn) flags = Checks::kFirstOp;  // before any span of it
  } else if (e.cat == kCatUserAnnotation && e.args && e.has_module_type && e.fqn != kNone) {
    fqn_flags(e.fqn) |= Checks::kSpan;  // traceio.module_span_fqn
  }
  if (e.name_is_compiled) c.compiled = true;
  if (e.cat == kCatModuleSpan) return true;  // the module track's view: not in end order
  if (c.threads.size() <= e.thread) c.threads.resize(e.thread + 1);
  CheckThread& thread = c.threads[e.thread];
  if (!thread.seen) {
    thread.seen = true;
    thread.last_end = end;
    ++c.n_threads;
  } else if (end < thread.last_end - kNestToleranceNs) {
    return false;  // not in end order: the Python checks load the file whole
  } else if (end > thread.last_end) {
    thread.last_end = end;
  }
  auto& stack = thread.stack;
  while (!stack.empty()) {  // the pending ranges this one encloses (traceio.nest's rule)
    const auto& top = stack.back();
    if (top.start < start || top.end > end + kNestToleranceNs ||
        !(top.start < end || top.start == start))
      break;
    if (top.has_depth && e.has_depth && top.depth != e.depth + 1)
      return false;  // args.depth is not the nesting
    stack.pop_back();
  }
  if (!stack.empty()) {
    auto& top = stack.back();
    if (start < top.end - kNestToleranceNs && end > top.end + kNestToleranceNs)
      return false;                                              // overlap without nesting
    if (e.has_depth && top.has_depth && top.depth == e.depth) {  // a sibling
      top.end = std::max(top.end, end);
      return true;
    }
  }
  stack.push_back({start, end, e.has_depth, e.depth});
  return true;
}

bool SummaryEngine::State::check_flow(const Event& e) {
  if (e.cat_kind == 2 || e.id_kind == 3) return false;  // keys only json.dumps spells
  Checks& c = *checks;
  FlowKey key{e.cat_kind == 1 ? e.cat_text : kNone, e.id_kind == 1,
              e.id_kind == 1 ? e.id_int : int64_t(e.id_text)};
  auto it = c.open.find(key);
  if (it == c.open.end()) {
    if (c.closed.contains(key)) return false;  // a flow seen again after both its ends
    it = c.open.emplace(key, std::pair<int64_t, int64_t>(0, 0)).first;
  }
  (e.ph == 's' ? it->second.first : it->second.second) += 1;
  if (it->second.first == 1 && it->second.second == 1) {
    c.open.erase(it);
    c.closed.add(key);
  }
  return true;
}

CheckResult SummaryEngine::State::check_result(bool incomplete) const {
  CheckResult r;
  const Checks& c = *checks;
  if (c.python) return r;
  for (const auto& [key, counts] : c.open) {
    if (counts.first + counts.second != 1) return r;  // a flow with too many ends
    ++r.loose_flows;
  }
  for (uint8_t flags : c.fqn_flags) r.missing_fqns += flags == Checks::kFirstOp;
  if (!incomplete && (r.loose_flows != 0 || r.missing_fqns != 0)) return r;
  if (r.missing_fqns != 0 && c.compiled) return r;  // compiled code may name them
  r.judged = true;
  r.threads = c.n_threads;
  return r;
}

// An entry of the module table (docs/trace-format.md, *Module table*), well formed.
bool SummaryEngine::State::is_module_entry(const Event& e) const {
  return e.name == module_entry && e.name_is_str && e.args && e.fqn != kNone &&
         !strings.str(e.fqn).empty() && e.has_module_type && e.module_type != kNone;
}

}  // namespace fqntrace::analysis

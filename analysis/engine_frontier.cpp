// One event through its thread's frame stack: the frontier algorithm that gives each op's
// self time to its owner in a post-order stream (summarize.StreamSummary.add).
#include <algorithm>

#include "analysis/engine_state.h"

namespace fqntrace::analysis {

// What an event adds where it stands in the file (Totals.add_in_file_order): a module table
// entry's class, a memory report, a module's end for the memory runs. False: an "M" record,
// nothing more to do with it.
bool SummaryEngine::State::in_file_order(const Event& e) {
  if (e.ph == 'M') {
    if (is_module_entry(e)) declared_type[e.fqn] = e.module_type;
    return false;
  }
  if (e.ph == 'i' && e.name_is_memory && e.args)
    memory_event(e);
  else if (e.ph == 'X' && e.args && e.has_module_type)
    module_end(e);
  return true;
}

// A range's groups (given by `put`, which merges them into a map) where the range now stands:
// merged into the sibling below it on the stack (every range enclosing one encloses the other),
// or on a slot of their own. Live, an outermost sibling is final (settle() would count it now):
// counting it before this one comes keeps each outermost range's time at its own start, so top
// can give it to its step. Merged, a second's worth of steps would count as one.
template <class Put>
void SummaryEngine::State::place(Thread& thread, const Event& e, int64_t start, int64_t end,
                                 Put put) {
  size_t k = thread.size;
  bool sibling =
      k > 0 && e.has_depth && thread.stack[k - 1].has_depth && thread.stack[k - 1].depth == e.depth;
  if (sibling && logging && e.depth == 0) {
    Pending& below = thread.stack[k - 1];
    for (auto& g : below.groups.items()) commit(g, below.start);
    below.groups.clear();
    put(below.groups);
    below.start = start;
    below.end = end;
  } else if (sibling) {
    Pending& below = thread.stack[k - 1];
    put(below.groups);
    below.end = std::max(below.end, end);
  } else {
    if (thread.stack.size() <= k) thread.stack.emplace_back();
    Pending& slot = thread.stack[k];
    slot.start = start;
    slot.end = end;
    slot.has_depth = e.has_depth;
    slot.depth = e.depth;
    slot.groups.clear();  // empty but after finish(), which counts the stack and leaves it
    put(slot.groups);
    thread.size = k + 1;
  }
}

bool SummaryEngine::State::apply(const Event& e) {
  if (e.cat == kCatModuleSpan) return true;  // the module track: a view, never counted
  if (!in_file_order(e)) return true;
  if (e.ph != 'X' || !e.args || e.fqn == kNone || !e.ts.ok || !e.dur.ok || e.dur.negative())
    return true;
  int64_t start = e.ts.ns();
  int64_t end = start + e.dur.ns();
  if (logging) seen(e, start, end);
  bool is_op = e.cat == kCatCpuOp;
  PhaseSums* p = add_event(e, start, is_op);
  Thread& thread = threads[e.thread];
  if (!thread.seen) {
    thread.seen = true;
    thread.last_end = end;
  } else if (end < thread.last_end - kNestToleranceNs) {
    return false;
  } else {
    thread.last_end = std::max(thread.last_end, end);
  }
  // The pending subtrees this range encloses: the top of the stack from k.
  size_t k = thread.size;
  while (k > 0) {
    Pending& c = thread.stack[k - 1];
    if (c.start < start || c.end > end + kNestToleranceNs || !(c.start < end || c.start == start))
      break;
    if (c.start == start && c.end == end && e.has_depth && c.has_depth && c.depth < e.depth)
      return false;  // an outer range written before its inner one
    --k;
  }
  if (is_op) {
    // An op: one group of its own, put straight where it belongs (no scratch to swap in).
    uint64_t owner = (uint64_t(e.phase) << 32) | e.fqn;
    int64_t excluded = 0;
    for (size_t j = k; j < thread.size; ++j) {
      for (auto& g : thread.stack[j].groups.items()) {
        if (g.key != owner) {
          excluded += g.dur;
          commit(g, start);
        } else {
          excluded += g.excluded;
        }
      }
    }
    Group g;
    g.key = owner;
    g.dur = end - start;
    g.excluded = excluded;
    if (p != nullptr) {
      uint32_t slot = per_step ? step_of(e.pid_key, start) : 0;
      g.contribs.add(Contrib{(uint64_t(e.name) << 32) | slot,
                             std::max<int64_t>(end - start - excluded, 0), 1});
    }
    for (size_t j = k; j < thread.size; ++j) thread.stack[j].groups.clear();
    thread.size = k;
    place(thread, e, start, end, [&g](SmallMap<Group>& into) { merge_group(into, std::move(g)); });
    return true;
  }
  Pending& fresh = scratch_pending;
  fresh.groups.clear();
  for (size_t j = k; j < thread.size; ++j) merge_groups(fresh.groups, thread.stack[j].groups);
  for (size_t j = k; j < thread.size; ++j) thread.stack[j].groups.clear();
  thread.size = k;
  place(thread, e, start, end,
        [&fresh](SmallMap<Group>& into) { merge_groups(into, fresh.groups); });
  return true;
}

}  // namespace fqntrace::analysis

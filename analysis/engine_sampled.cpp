// A sampled trace's summary (Mode::kSampled): the rules of fqntrace.analysis.sampled (its module
// docstring says what each phase's time is and why): complete ranges counted by their own time,
// the loose ops outside all of them estimated at dur/p with their variance.
#include <algorithm>
#include <cmath>

#include "analysis/engine_state.h"

namespace fqntrace::analysis {

namespace {

// Removes the items inside [start, end] (the last ones: a thread's ranges come in end order) and
// returns the sum of their durations (sampled._pop_enclosed).
int64_t pop_enclosed(std::vector<SampledRange>& items, int64_t start, int64_t end) {
  int64_t sum = 0;
  while (!items.empty() && items.back().start >= start - kNestToleranceNs &&
         items.back().end <= end + kNestToleranceNs) {
    sum += items.back().dur;
    items.pop_back();
  }
  return sum;
}

void pop_enclosed(std::vector<LooseOp>& items, int64_t start, int64_t end) {
  while (!items.empty() && items.back().start >= start - kNestToleranceNs &&
         items.back().end <= end + kNestToleranceNs)
    items.pop_back();
}

int64_t round_half_even(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

}  // namespace

// SampledSummary._time: ns of a module's own time in a phase (and its step's).
void SummaryEngine::State::sampled_time(uint32_t pid_key, uint32_t fqn, uint32_t phase,
                                        int64_t start, int64_t ns) {
  if (phase >= kPhases) return;
  bool created;
  ModuleSums& m = module(fqn, start, created);
  if (!created && start < m.first_seen) m.first_seen = start;
  m.phases[phase].self_ns += ns;
  uint32_t slot = per_step ? step_of(pid_key, start) : 0;
  if (slot != 0) step_times[phase][(uint64_t(slot) << 32) | fqn] += ns;
}

SampledThread& SummaryEngine::State::sampled_thread(uint32_t thread) {
  if (sampled_threads.size() <= thread) sampled_threads.resize(thread + 1);
  SampledThread& t = sampled_threads[thread];
  if (!t.listed) {  // the Python rules' dict of threads: in the order each first counts
    t.listed = true;
    sampled_order.push_back(thread);
  }
  return t;
}

// SampledSummary._settle_loose: the loose ops outside [start, end] (or all) are settled.
void SummaryEngine::State::settle_loose(SampledThread& t, bool all, int64_t start, int64_t end) {
  size_t kept = 0;
  for (const LooseOp& op : t.loose) {
    if (!all && op.start >= start && op.end <= end)
      t.loose[kept++] = op;
    else
      t.settled.push_back(op);
  }
  t.loose.resize(kept);
}

bool SummaryEngine::State::apply_sampled(const Event& e) {
  if (e.cat == kCatModuleSpan) {
    // A backward module span: its module's nodes' time, all of them (SampledSummary._span).
    if (e.ph == 'X' && node_spans && e.args && e.has_node_ns && e.node_ns > 0 && e.fqn != kNone &&
        e.ts.ok)
      sampled_time(e.pid_key, e.fqn, e.phase, e.ts.ns(), e.node_ns);
    return true;
  }
  if (!in_file_order(e)) return true;
  if (e.ph != 'X' || !e.args || e.fqn == kNone || !e.ts.ok || !e.dur.ok || e.dur.negative())
    return true;
  int64_t start = e.ts.ns();
  int64_t end = start + e.dur.ns();
  int64_t ns = end - start;
  bool is_op = e.cat == kCatCpuOp;
  PhaseSums* p = add_event(e, start, is_op);
  if (e.name_is_step) return true;
  SampledThread& t = sampled_thread(e.thread);
  if (is_op && e.has_fwd_thread && !e.name_is_wrapper) {
    // an autograd node; a node inside it (a reentrant backward) counts apart
    int64_t inner = pop_enclosed(t.nodes, start, end);
    pop_enclosed(t.loose, start, end);
    if (!node_spans || e.fqn == global_fqn)
      sampled_time(e.pid_key, e.fqn, e.phase, start, ns - inner);
    t.nodes.push_back({start, end, ns});
  } else if (is_op) {
    if (p != nullptr && !e.name_is_wrapper) {  // the op mix, not the time
      auto& top = p->top[e.name];
      top.first += round_half_even(static_cast<double>(ns) / sample_p);
      top.second += 1;
    }
    if (e.fqn == global_fqn && p != nullptr && !e.has_fwd_thread) {
      pop_enclosed(t.loose, start, end);  // the outer op's time holds theirs
      t.loose.push_back({start, end, e.pid_key, e.fqn, e.phase, e.has_stack_depth, e.stack_depth});
    }
  } else if (e.cat == kCatUserAnnotation && !e.async_work &&
             (e.has_module_type || e.fqn == global_fqn)) {
    // a module scope, or a user scope outside every module: its own wall time
    int64_t inner = pop_enclosed(t.walls, start, end);
    inner += pop_enclosed(t.nodes, start, end);
    pop_enclosed(t.loose, start, end);
    sampled_time(e.pid_key, e.fqn, e.phase, start, std::max<int64_t>(ns - inner, 0));
    t.walls.push_back({start, end, ns});
  }
  if (e.has_depth && e.depth == 0) {
    // nothing written later encloses what came before an outermost range
    settle_loose(t, false, start, end);
    t.walls.clear();
    t.nodes.clear();
  }
  return true;
}

// SampledSummary.result's first half: every loose op settles; the program's own calls among
// them (within kNestedBytes of the thread's shallowest) count at dur/p, with their variance.
void SummaryEngine::State::finish_sampled() {
  double spread = (1 - sample_p) / std::pow(sample_p, 2.0);
  for (uint32_t thread : sampled_order) {
    SampledThread& t = sampled_threads[thread];
    settle_loose(t, true, 0, 0);
    bool known = false;
    int64_t shallowest = 0;
    for (const LooseOp& op : t.settled) {
      if (!op.has_stack_depth) continue;
      if (!known || op.stack_depth < shallowest) shallowest = op.stack_depth;
      known = true;
    }
    for (const LooseOp& op : t.settled) {
      if (op.has_stack_depth && known && op.stack_depth > shallowest + kNestedBytes) continue;
      int64_t dur = op.end - op.start;
      sampled_time(op.pid_key, op.fqn, op.phase, op.start,
                   round_half_even(static_cast<double>(dur) / sample_p));
      if (op.phase < kPhases) {
        uint64_t key = (uint64_t(op.phase) << 32) | op.fqn;
        variance[key] += spread * static_cast<double>(dur) * static_cast<double>(dur);
      }
    }
    t.settled.clear();
  }
}

}  // namespace fqntrace::analysis

// What a counted range adds: its module's totals per phase, the per-step times (self and CPU),
// and the memory reports' per-module sums.
#include <algorithm>

#include "analysis/engine_state.h"

namespace fqntrace::analysis {

ModuleSums& SummaryEngine::State::module(uint32_t fqn, int64_t first_seen, bool& created) {
  if (module_of.size() <= fqn) module_of.resize(strings.size() + 1, -1);
  int32_t& index = module_of[fqn];
  created = index < 0;
  if (created) {
    index = static_cast<int32_t>(modules.size());
    modules.emplace_back();
    modules.back().fqn = fqn;
    modules.back().first_seen = first_seen;
  }
  return modules[index];
}

bool SummaryEngine::State::has_module(uint32_t fqn) const {
  return fqn < module_of.size() && module_of[fqn] >= 0;
}

// Totals.add_event: the counts of one valid slice (its CPU time among them); the phase sums an
// op's self time goes to, or nullptr.
PhaseSums* SummaryEngine::State::add_event(const Event& e, int64_t start, bool is_op) {
  bool created;
  ModuleSums& m = module(e.fqn, start, created);
  if (!created && start < m.first_seen) m.first_seen = start;
  bool known_phase = e.phase < kPhases;
  if (known_phase && e.cpu.ok && !e.cpu.negative()) add_cpu(e, m, start);
  if (!is_op && e.cat == kCatDevice) {
    if (known_phase) {
      m.phases[e.phase].device_ns += e.dur.ns();
      device_seen = true;
    }
    return nullptr;
  }
  if (!is_op && e.cat == kCatUserAnnotation && e.has_module_type) {
    if (m.module_type.empty() && e.module_type != kNone) m.module_type = strings.str(e.module_type);
    if (e.phase == 0) m.calls += 1;
    return nullptr;
  }
  if (known_phase && e.async_work) {
    m.phases[e.phase].comm_ns += e.dur.ns();
    return nullptr;
  }
  if (!known_phase || !is_op) return nullptr;
  PhaseSums& p = m.phases[e.phase];
  if (e.has_collective) {
    p.collectives += 1;
    if (e.bytes_int) p.comm_bytes += e.bytes;
  } else if (e.flops_int) {
    p.self_flops += e.flops;
  }
  if (!e.has_fwd_thread && !e.name_is_wrapper) p.self_ops += 1;
  return &p;
}

// A range's own CPU time (Totals.add_event): already without that of the measured ranges
// inside it, so it counts as it comes.
void SummaryEngine::State::add_cpu(const Event& e, ModuleSums& m, int64_t start) {
  int64_t ns = e.cpu.is_int ? e.cpu.i : static_cast<int64_t>(std::nearbyint(e.cpu.d));
  m.phases[e.phase].cpu_ns += ns;
  cpu_seen = true;
  if (logging) log.push_back({LiveRecord::kCpu, uint8_t(e.phase), e.fqn, start, ns});
  uint32_t slot = per_step ? step_of(e.pid_key, start) : 0;
  if (slot != 0) step_cpu[e.phase][(uint64_t(slot) << 32) | e.fqn] += ns;
}

uint32_t SummaryEngine::State::step_of(uint32_t pid_key, int64_t start) {
  // The last range with r.start <= start, if start lies in it. Most events lie in the range
  // the event before found (a thread's events come in time order): that one first.
  const std::vector<Range>* rs;
  if (step_cache.valid && step_cache.pid_key == pid_key) {
    rs = step_cache.ranges;
    size_t i = step_cache.index;
    if ((*rs)[i].start <= start && (i + 1 == rs->size() || start < (*rs)[i + 1].start))
      return start < (*rs)[i].end ? step_cache.slot : 0;  // the range's slot is known
  } else {
    auto it = ranges.find(pid_key);
    if (it == ranges.end() || it->second.empty()) return 0;
    rs = &it->second;
  }
  auto after = std::upper_bound(rs->begin(), rs->end(), start,
                                [](int64_t t, const Range& r) { return t < r.start; });
  if (after == rs->begin()) return 0;
  const Range& r = *(after - 1);
  if (!(start < r.end)) return 0;
  uint32_t slot = slot_of(r.step);
  step_cache = {true, pid_key, rs, static_cast<size_t>(after - 1 - rs->begin()), slot};
  return slot;
}

uint32_t SummaryEngine::State::slot_of(int64_t step) {
  auto slot = step_slot.find(step);
  if (slot == step_slot.end()) {
    step_numbers.push_back(step);
    slot = step_slot.emplace(step, static_cast<uint32_t>(step_numbers.size())).first;
  }
  return slot->second;
}

// A frontier group's ops count. `when` (ns): the start of the range that holds them (theirs
// when outermost), which lies in the step their starts lie in: top's live log gives them to it.
void SummaryEngine::State::commit(Group& g, int64_t when) {
  if (g.contribs.size() == 0) return;
  uint32_t fqn = static_cast<uint32_t>(g.key);
  int phase = static_cast<int>(g.key >> 32);  // contributions exist only in PHASES
  PhaseSums& p = modules[module_of[fqn]].phases[phase];
  if (logging) {
    int64_t ns = 0;
    for (auto& c : g.contribs.items()) ns += c.ns;
    if (ns != 0) log.push_back({LiveRecord::kCounted, uint8_t(phase), fqn, when, ns});
  }
  for (auto& c : g.contribs.items()) {
    uint32_t name = static_cast<uint32_t>(c.key >> 32);
    uint32_t slot = static_cast<uint32_t>(c.key);
    p.self_ns += c.ns;
    auto& top = p.top[name];
    top.first += c.ns;
    top.second += c.count;
    if (per_step && slot != 0) step_times[phase][(uint64_t(slot) << 32) | fqn] += c.ns;
  }
}

uint32_t SummaryEngine::State::node(uint32_t fqn) {
  if (node_of.size() <= fqn) node_of.resize(strings.size() + 1, -1);
  int32_t& index = node_of[fqn];
  if (index < 0) {
    index = static_cast<int32_t>(nodes.size());
    nodes.emplace_back();
    nodes.back().fqn = fqn;
  }
  return static_cast<uint32_t>(index);
}

const std::vector<uint32_t>& SummaryEngine::State::chain(uint32_t fqn) {
  auto it = chains.find(fqn);
  if (it != chains.end()) return it->second;
  std::vector<uint32_t> out{node(fqn)};
  std::string text = strings.str(fqn);
  for (size_t dot = text.rfind('.'); dot != std::string::npos && dot > 0;
       dot = text.rfind('.', dot - 1)) {
    out.push_back(node(strings.id(text.substr(0, dot))));
    if (dot == 0) break;
  }
  return chains.emplace(fqn, std::move(out)).first->second;
}

void SummaryEngine::State::close_run(const Thread::Run& run) {
  int64_t& peak = nodes[run.node].numbers[run.phase][2];
  peak = std::max(peak, run.peak);
}

void SummaryEngine::State::memory_event(const Event& e) {
  if (e.fqn != kNone && !has_module(e.fqn)) {
    bool created;
    module(e.fqn, e.ts.ok ? e.ts.ns() : 0, created);
  }
  if (e.fqn == kNone || e.phase >= kPhases || !e.size_int) return;
  memory_seen = true;
  int phase = static_cast<int>(e.phase);
  const std::vector<uint32_t> links = chain(e.fqn);
  auto& runs = threads[e.thread].runs;
  auto in_chain = [&](uint32_t n) {
    return std::find(links.begin(), links.end(), n) != links.end();
  };
  size_t kept = 0;
  for (auto& run : runs) {
    if (run.phase != phase || !in_chain(run.node))
      close_run(run);
    else
      runs[kept++] = run;
  }
  runs.resize(kept);
  for (uint32_t n : links) {
    bool has = false;
    for (auto& run : runs) has = has || run.node == n;
    if (!has) runs.push_back({n, phase, seq, 0, 0});
  }
  int64_t* own = nodes[links[0]].numbers[phase];
  uint64_t live_key = (uint64_t(e.pid_str) << 32) | e.addr_key;
  if (e.size > 0) {
    own[0] += e.size;
    for (auto& run : runs) {
      run.live += e.size;
      run.peak = std::max(run.peak, run.live);
    }
    live[live_key] = Block{e.size, seq, e.thread, links[0], phase};
  } else if (e.size < 0) {
    own[1] += -e.size;
    auto it = live.find(live_key);
    if (it != live.end()) {
      Block b = it->second;
      live.erase(it);
      for (auto& run : runs)
        if (b.thread == e.thread && b.seq >= run.start_seq) run.live -= b.size;
      if (phase == 1 && b.phase != 1) nodes[b.node].numbers[b.phase][3] += b.size;
      if (phase != 1 && b.phase == 1) nodes[b.node].numbers[b.phase][4] += b.size;
    }
  }
  seq += 1;
}

void SummaryEngine::State::module_end(const Event& e) {
  if (e.fqn == kNone || e.fqn >= node_of.size() || node_of[e.fqn] < 0) return;
  auto& runs = threads[e.thread].runs;
  if (runs.empty()) return;
  uint32_t n = static_cast<uint32_t>(node_of[e.fqn]);
  size_t kept = 0;
  for (auto& run : runs) {
    if (run.node == n && static_cast<uint32_t>(run.phase) == e.phase)
      close_run(run);
    else
      runs[kept++] = run;
  }
  runs.resize(kept);
}

}  // namespace fqntrace::analysis

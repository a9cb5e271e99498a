// The summary engine's modes (sums, validate's checks, top's live log, repair's count) and its
// public API (analysis/summary_engine.h). The work itself: analysis/engine_state.h lists where.
#include "analysis/summary_engine.h"

#include "analysis/engine_state.h"

namespace fqntrace::analysis {

// A parsed block's events: the sums, or validate's checks.
long SummaryEngine::State::consume() {
  if (counting) {
    for (const Event& e : events) slices += e.ph == 'X';
    return static_cast<long>(events.size());
  }
  for (const Event& e : events) {
    if (checks != nullptr) {
      if (!check_event(e)) return kProblem;
    } else if (sampled) {
      apply_sampled(e);
    } else if (!apply(e)) {
      return kNotPostOrder;
    }
  }
  return static_cast<long>(events.size());
}

void SummaryEngine::State::seen(const Event& e, int64_t start, int64_t end) {  // LiveSummary.seen
  if (!any_range || end > latest_ns) latest_ns = end;
  if (!any_range || start < first_ns) first_ns = start;
  any_range = true;
  if (e.name_is_step)
    log.push_back({LiveRecord::kStep, uint8_t(e.cat == kCatUserAnnotation), e.name, start, end});
}

void SummaryEngine::State::settle() {  // StreamSummary.commit_pending(outermost_only=True)
  for (auto& thread : threads) {
    size_t kept = 0;
    for (size_t j = 0; j < thread.size; ++j) {
      Pending& pending = thread.stack[j];
      if (!(pending.has_depth && pending.depth == 0)) {
        if (kept != j) std::swap(thread.stack[kept], pending);
        ++kept;
        continue;
      }
      for (auto& g : pending.groups.items()) commit(g, pending.start);
      pending.groups.clear();
    }
    thread.size = kept;
  }
}

void SummaryEngine::State::finish() {
  if (sampled) finish_sampled();
  for (auto& thread : threads) {
    for (size_t j = 0; j < thread.size; ++j)
      for (auto& g : thread.stack[j].groups.items()) commit(g, thread.stack[j].start);
    thread.size = 0;
    for (auto& run : thread.runs) close_run(run);
    thread.runs.clear();
  }
  for (auto& n : nodes) n.live_grad = 0;
  for (auto& [key, b] : live)
    if (b.phase == 1) nodes[b.node].live_grad += b.size;
}

SummaryEngine::SummaryEngine(bool jsonl, Mode mode)
    : state_(std::make_unique<State>(jsonl, mode)) {}
SummaryEngine::~SummaryEngine() = default;

void SummaryEngine::add_step_range(const std::string& pid_key, int64_t start, int64_t end,
                                   int64_t step) {
  state_->ranges[state_->strings.id(pid_key)].push_back({start, end, step});
  state_->step_cache.valid = false;
  state_->per_step = true;
  state_->ranges_sorted = false;
}

long SummaryEngine::feed_block(const char* data, size_t size) {
  return state_->feed(data, size, true);
}

long SummaryEngine::feed_event(const char* data, size_t size) {
  return state_->feed(data, size, false);
}

void SummaryEngine::finish() { state_->finish(); }

void SummaryEngine::set_sample(double p, bool node_spans) {
  state_->sample_p = p;
  state_->node_spans = node_spans;
}

std::vector<Variance> SummaryEngine::variances() const {
  std::vector<Variance> out;
  for (const auto& [key, v] : state_->variance)
    out.push_back({static_cast<uint32_t>(key), static_cast<int>(key >> 32), v});
  return out;
}
const std::vector<ModuleSums>& SummaryEngine::modules() const { return state_->modules; }
const std::vector<MemoryNode>& SummaryEngine::memory_nodes() const { return state_->nodes; }
bool SummaryEngine::memory_seen() const { return state_->memory_seen; }
bool SummaryEngine::device_seen() const { return state_->device_seen; }
const std::string& SummaryEngine::fqn(uint32_t id) const { return state_->strings.str(id); }
std::vector<std::pair<uint32_t, uint32_t>> SummaryEngine::declared_types() const {
  return {state_->declared_type.begin(), state_->declared_type.end()};
}
const std::string& SummaryEngine::name(uint32_t id) const { return state_->strings.str(id); }

void SummaryEngine::for_each_step_time(void (*visit)(void*, int64_t, uint32_t, int, int64_t),
                                       void* ctx, bool cpu) const {
  for (int phase = 0; phase < kPhases; ++phase)
    for (auto& [key, ns] : (cpu ? state_->step_cpu : state_->step_times)[phase])
      visit(ctx, state_->step_numbers[(key >> 32) - 1], static_cast<uint32_t>(key), phase, ns);
}

bool SummaryEngine::cpu_seen() const { return state_->cpu_seen; }

int64_t SummaryEngine::slices() const { return state_->slices; }

CheckResult SummaryEngine::check_result(bool incomplete) const {
  if (state_->checks == nullptr) return CheckResult();
  return state_->check_result(incomplete);
}

void SummaryEngine::settle() { state_->settle(); }

std::vector<LiveRecord> SummaryEngine::take_log() {
  std::vector<LiveRecord> out;
  out.swap(state_->log);
  return out;
}

bool SummaryEngine::live_span(int64_t& first, int64_t& latest) const {
  first = state_->first_ns;
  latest = state_->latest_ns;
  return state_->any_range;
}

}  // namespace fqntrace::analysis

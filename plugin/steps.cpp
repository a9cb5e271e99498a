#include "plugin/steps.h"

#include <atomic>
#include <mutex>
#include <string>

#include "buffer/event.h"
#include "buffer/intern.h"
#include "buffer/ticks.h"
#include "plugin/observer.h"
#include "plugin/session.h"
#include "plugin/session_state.h"

namespace fqntrace::steps {
namespace {

std::mutex g_step_mu;  // steps end once per iteration: a lock costs nothing here
StepWindow g_window;
std::atomic<uint64_t> g_step{0};
std::atomic<uint64_t> g_step_start{0};
std::mutex g_track_mu;  // one producer at a time on the steps' track
ThreadBuffer* g_track = nullptr;  // guarded by g_track_mu; buffers outlive sessions

}  // namespace

bool begin_session(const StepWindow& window) {
  std::lock_guard<std::mutex> lock(g_step_mu);
  g_window = window;
  g_step.store(0, std::memory_order_relaxed);
  g_step_start.store(now_ticks(), std::memory_order_relaxed);
  return window.contains(0);
}

void end_step(bool at_enclosing_end) {
  if (!session_state::running()) return;
  bool recorded, next_recorded;
  {
    std::lock_guard<std::mutex> lock(g_step_mu);
    uint64_t step = g_step.load(std::memory_order_relaxed);
    recorded = g_window.contains(step);
    next_recorded = g_window.contains(step + 1);
    if (recorded) {
      // Kineto's name, which HolisticTraceAnalysis parses (ProfilerStep#<n>).
      uint32_t name_id = InternTable::instance().intern("ProfilerStep#" + std::to_string(step));
      uint64_t start = g_step_start.load(std::memory_order_relaxed);
      if (!at_enclosing_end || !observer::defer_step_range(name_id, start)) {
        write_range(name_id, start, now_ticks());
      }
    } else {
      g_step_start.store(now_ticks(), std::memory_order_relaxed);
    }
    g_step.store(step + 1, std::memory_order_relaxed);
  }
  // Outside the lock: the session's lock is taken before ours when a session starts. Ranges
  // already open keep the callbacks they started with, so a step range waiting for the
  // optimizer's range is still written after the callback is removed here.
  if (recorded != next_recorded) set_session_recording(next_recorded);
}

uint64_t current() { return g_step.load(std::memory_order_relaxed); }

void write_range(uint32_t name_id, uint64_t start_ticks, uint64_t end_ticks) {
  g_step_start.store(end_ticks, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(g_track_mu);
  if (g_track == nullptr) g_track = session_state::register_buffer(kStepTrackTid, "ProfilerStep");
  if (g_track == nullptr) return;
  RawEvent e;
  e.range.op = OpPayload{};  // payloads are 16 B each: clears them all
  e.range.rf_id = 0;
  e.range.start_ns = start_ticks;
  e.range.end_ns = end_ticks;
  e.range.seq = -1;
  e.range.name_id = name_id;
  e.range.fqn_id = kGlobalFqnId;
  e.kind = EventKind::kUserScope;
  e.phase = Phase::kForward;
  e.depth = 0;
  e.flags = 0;
  if (g_track->ring.push(e) == EventRing::Push::kHalfFull) session_state::wake_drain();
}

}  // namespace fqntrace::steps

#include "plugin/steps.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <deque>
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

// The slow-step trigger's statistics: the last kRecent durations of steps not recorded, the
// first kWarmup steps of a session ignored (compilation, caches), at least kRecent / 2 samples
// before it may fire, and kCoolDown steps after a slow-step capture ends before the next may.
constexpr size_t kRecent = 32;
constexpr uint64_t kWarmup = 10;
constexpr uint64_t kCoolDown = 100;

struct ActiveCapture {
  uint32_t index = 0;  // 0: none
  uint64_t first_step = 0;
  uint64_t steps = 0;  // 0: ends at end_capture()
  bool memory = false;
  bool recording = false;  // false: pending, waiting for first_step
  bool slow = false;       // started by the slow-step trigger: a cool-down follows
};

std::mutex g_step_mu;  // steps end once per iteration: a lock costs nothing here
StepWindow g_window;
SlowTrigger g_slow;
ActiveCapture g_capture;         // guarded by g_step_mu
uint64_t g_step_wall_start = 0;  // monotonic ns the running step began (the trigger's clock)
uint64_t g_recent[kRecent];      // durations (ns) of recent steps not recorded
size_t g_recent_count = 0;
uint64_t g_median_ns = 0;        // of g_recent, refreshed every kRecent / 2 steps
uint64_t g_slow_not_before = 0;  // first step the trigger may fire at
uint32_t g_slow_fired = 0;
// Guarded by g_step_mu. Built on first use: a session may start from another library's static
// initializer (plugin/autostart.cpp), before this file's globals are constructed.
std::deque<Segment>& segments_log() {
  static auto* log = new std::deque<Segment>();
  return *log;
}
size_t g_segments_first = 0;  // number of segments_log().front()

std::atomic<uint64_t> g_step{0};
std::atomic<uint64_t> g_step_start{0};
std::mutex g_track_mu;            // one producer at a time on the steps' track
ThreadBuffer* g_track = nullptr;  // guarded by g_track_mu; buffers outlive sessions

bool main_records(uint64_t step) { return g_window.contains(step); }
bool capture_records(uint64_t step) {
  const ActiveCapture& c = g_capture;
  return c.index != 0 && c.recording && (c.steps == 0 || step < c.first_step + c.steps);
}

// Caller holds g_step_mu. A new segment when the state changes.
void push_segment(uint64_t ticks, bool main, uint32_t capture, uint32_t tail_name_id) {
  if (!segments_log().empty()) {
    const Segment& last = segments_log().back();
    if (last.main == main && last.capture == capture && tail_name_id == 0) return;
  }
  segments_log().push_back({ticks, main, capture, tail_name_id});
  while (segments_log().size() > kSegmentsKept) {
    segments_log().pop_front();
    ++g_segments_first;
  }
}

uint64_t median_of_recent() {
  uint64_t copy[kRecent];
  size_t n = std::min(g_recent_count, kRecent);
  std::copy(g_recent, g_recent + n, copy);
  std::nth_element(copy, copy + n / 2, copy + n);
  return copy[n / 2];
}

std::string ms_text(uint64_t ns) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f ms", static_cast<double>(ns) / 1e6);
  return text;
}

// Caller holds g_step_mu. A capture is pending, recording or still being written.
bool capture_under_way() { return g_capture.index != 0 || captures::busy(); }

// Caller holds g_step_mu and checked capture_under_way(). `c` becomes the capture, from step
// c.first_step on; `recording`: it records already (a timed one), else the step hook starts it.
uint32_t arm_capture(captures::Capture c, bool recording, bool slow) {
  c = captures::add(c);
  g_capture = ActiveCapture{c.index, c.first_step, c.steps, c.memory, recording, slow};
  return c.index;
}

// Caller holds g_step_mu; `step` just ended after `duration_ns` and counts for the trigger. A
// slow one arms a capture of the next steps (pending: end_step begins it at once).
void slow_step(uint64_t step, uint64_t duration_ns) {
  if (step < kWarmup) return;
  g_recent[g_recent_count % kRecent] = duration_ns;
  ++g_recent_count;
  if (g_recent_count < kRecent / 2) return;
  if (g_median_ns == 0 || g_recent_count % (kRecent / 2) == 0) g_median_ns = median_of_recent();
  if (static_cast<double>(duration_ns) <= g_slow.factor * static_cast<double>(g_median_ns)) return;
  if (step < g_slow_not_before || g_slow_fired >= g_slow.max_captures || capture_under_way())
    return;
  captures::Capture c;
  char ratio[32];
  std::snprintf(ratio, sizeof(ratio), "%.1fx",
                static_cast<double>(duration_ns) / static_cast<double>(g_median_ns));
  c.reason = "slow step " + std::to_string(step) + ": " + ms_text(duration_ns) + ", " + ratio +
             " the median " + ms_text(g_median_ns) + " of the last " +
             std::to_string(std::min(g_recent_count, kRecent)) + " steps";
  c.first_step = step + 1;
  c.steps = g_slow.steps;
  arm_capture(c, /*recording=*/false, /*slow=*/true);
  ++g_slow_fired;
}

}  // namespace

bool begin_session(const StepWindow& window, const SlowTrigger& slow) {
  std::lock_guard<std::mutex> lock(g_step_mu);
  g_window = window;
  g_slow = slow;
  g_capture = ActiveCapture{};
  g_recent_count = 0;
  g_median_ns = 0;
  g_slow_not_before = 0;
  g_slow_fired = 0;
  g_step.store(0, std::memory_order_relaxed);
  uint64_t now = now_ticks();
  g_step_start.store(now, std::memory_order_relaxed);
  g_step_wall_start = monotonic_ns();
  g_segments_first += segments_log().size();
  segments_log().clear();
  push_segment(now, window.contains(0), 0, 0);
  return window.contains(0);
}

void end_step(bool at_enclosing_end) {
  if (!session_state::running()) return;
  bool changed;
  {
    std::lock_guard<std::mutex> lock(g_step_mu);
    uint64_t step = g_step.load(std::memory_order_relaxed);
    bool recorded = main_records(step) || capture_records(step);
    // One tick for the step's end, the next step's start and the segment that begins with it,
    // so the next step's range lies in that segment.
    uint64_t boundary = now_ticks();
    uint64_t wall = monotonic_ns();
    uint64_t duration = wall - g_step_wall_start;
    g_step_wall_start = wall;
    uint32_t name_id = 0;
    if (recorded) {
      // Kineto's name, which HolisticTraceAnalysis parses (ProfilerStep#<n>).
      name_id = InternTable::instance().intern("ProfilerStep#" + std::to_string(step));
      uint64_t start = g_step_start.load(std::memory_order_relaxed);
      if (!at_enclosing_end || !observer::defer_step_range(name_id, start)) {
        write_range(name_id, start, boundary);
      }
    } else {
      g_step_start.store(boundary, std::memory_order_relaxed);
    }
    // A step recorded is slower by the tracing itself: it neither counts nor triggers, unless
    // every step is recorded (a full trace), where all are slowed alike.
    if (g_slow.factor > 0 && (!recorded || g_window.all())) slow_step(step, duration);
    uint64_t next = step + 1;
    g_step.store(next, std::memory_order_relaxed);
    uint32_t tail = 0;
    ActiveCapture& c = g_capture;
    if (c.index != 0 && !c.recording && next >= c.first_step) {
      c.recording = true;
      c.first_step = next;
      captures::set_state(c.index, captures::State::kRecording);
    } else if (c.index != 0 && c.recording && c.steps != 0 && next >= c.first_step + c.steps) {
      captures::set_last_step(c.index, step);
      if (c.slow) g_slow_not_before = next + kCoolDown;
      tail = name_id;
      c = ActiveCapture{};
    }
    bool next_main = main_records(next);
    push_segment(boundary, next_main, c.recording ? c.index : 0, tail);
    changed = recorded != (next_main || capture_records(next));
  }
  // Outside the lock: the session's lock is taken before ours when a session starts. Ranges
  // already open keep the callbacks they started with, so a step range waiting for the
  // optimizer's range is still written after the callback is removed here.
  if (changed) update_session_recording();
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

bool order_capture(captures::Capture capture, uint64_t at_step, std::string* why, uint32_t* index) {
  bool now;
  {
    std::lock_guard<std::mutex> lock(g_step_mu);
    if (!session_state::running()) {
      *why = "fqntrace is not tracing in this process";
      return false;
    }
    uint64_t step = g_step.load(std::memory_order_relaxed);
    if (capture_under_way()) {
      *why = "a capture is already under way";
      return false;
    }
    if (at_step == kNextStep) at_step = step + 1;
    now = capture.steps == 0;
    if (!now && at_step <= step) {
      *why = "step " + std::to_string(at_step) + " has passed (this process is at step " +
             std::to_string(step) + ")";
      return false;
    }
    capture.first_step = now ? step : at_step;
    uint32_t armed = arm_capture(capture, /*recording=*/now, /*slow=*/false);
    if (index != nullptr) *index = armed;
    if (now) {
      captures::set_state(armed, captures::State::kRecording);
      push_segment(now_ticks(), main_records(step), armed, 0);
    }
  }
  if (now) update_session_recording();
  return true;
}

void end_capture(uint32_t index) {
  {
    std::lock_guard<std::mutex> lock(g_step_mu);
    if (g_capture.index != index || !g_capture.recording) return;
    uint64_t step = g_step.load(std::memory_order_relaxed);
    captures::set_last_step(index, step);
    g_capture = ActiveCapture{};
    push_segment(now_ticks(), main_records(step), 0, 0);
  }
  update_session_recording();
}

bool recording_wanted(bool* capture_memory) {
  std::lock_guard<std::mutex> lock(g_step_mu);
  uint64_t step = g_step.load(std::memory_order_relaxed);
  bool capture = capture_records(step);
  *capture_memory = capture && g_capture.memory;
  return main_records(step) || capture;
}

void recording_target(bool* main, uint32_t* capture) {
  std::lock_guard<std::mutex> lock(g_step_mu);
  uint64_t step = g_step.load(std::memory_order_relaxed);
  *main = session_state::running() && main_records(step);
  *capture = capture_records(step) ? g_capture.index : 0;
}

size_t segments_since(size_t from, std::vector<Segment>* out, uint64_t* known_until) {
  std::lock_guard<std::mutex> lock(g_step_mu);
  *known_until = now_ticks();  // every segment's start is read under this lock too
  size_t begin = from < g_segments_first ? 0 : from - g_segments_first;
  for (size_t i = begin; i < segments_log().size(); ++i) out->push_back(segments_log()[i]);
  return g_segments_first + segments_log().size();
}

}  // namespace fqntrace::steps

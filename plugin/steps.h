// Training steps: the step counter, the step window (FQNTRACE_STEPS), captures (docs/on-demand.md)
// and the `ProfilerStep#N` ranges. A step ends at every optimizer step (the Python package's
// global optimizer hook) or at fqntrace::step(). The counter runs whether or not a step is
// recorded, so numbering stays right; while neither the window nor a capture records, the
// observer's callback is removed (the cost of tracing off).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "plugin/captures.h"
#include "plugin/step_window.h"

namespace fqntrace::steps {

// The slow-step trigger (FQNTRACE_CAPTURE_SLOW): a step not recorded that takes more than
// `factor` times the median of the recent steps not recorded starts a capture of the next
// `steps` steps; at most `max_captures` per session, and none within the cool-down after one.
struct SlowTrigger {
  double factor = 0.0;  // 0: off
  uint32_t steps = 3;
  uint32_t max_captures = 5;
};

// Session start (session.cpp), after the tick source is chosen: step 0 begins now. `trace_file`:
// the window's steps go to the trace file (false: armed with no window). Returns whether step 0
// is recorded (the session installs the callback only then).
bool begin_session(const StepWindow& window, const SlowTrigger& slow);

// The current step ends and the next begins. `at_enclosing_end`: the step range ends where the
// range open around the caller ends (the optimizer's `Optimizer.step#…` range, inside which its
// hooks run), so that range stays inside its step; else it ends now.
void end_step(bool at_enclosing_end);

// Number of the step running now (steps ended so far in this session).
uint64_t current();

// Writes the range `name_id` [start, end) (ticks) on the steps' own track, and the next step
// begins at `end`. Called by end_step() and by the observer for a deferred step (once per step:
// it takes a lock, so several threads may end steps).
void write_range(uint32_t name_id, uint64_t start_ticks, uint64_t end_ticks);

// Captures. A capture with steps > 0 starts recording when step `at_step` begins (kNextStep: the
// next one) and ends when `steps` steps have; with steps == 0 it starts now and ends at
// end_capture(). false with *why when a capture is already under way, the step has passed, or no
// session runs. Any thread; the callback is installed by the session, never here.
constexpr uint64_t kNextStep = UINT64_MAX;
bool order_capture(captures::Capture capture, uint64_t at_step, std::string* why,
                   uint32_t* index = nullptr);
// Ends the capture `index` now if it still records (a capture timed in seconds).
void end_capture(uint32_t index);

// Whether the callback should be installed now (the window's step or a capture records), and
// whether the allocator's reports are wanted by the capture. The session asks after every change.
bool recording_wanted(bool* capture_memory);

// What the running step records into: the trace file (*main) and/or the capture *capture (0:
// none). FQNTRACE_DEVICE's collector follows it at every step's end.
void recording_target(bool* main, uint32_t* capture);

// The recording state from `start_ticks` on, until the next segment: the trace file records
// (`main`), and/or the capture `capture` (0: none). The drain sends each event to the outputs
// of the segment its start lies in. `tail_name_id` (a capture's end): the name of its last step
// range, which the drain waits for before completing the capture's file (0: none to wait for).
struct Segment {
  uint64_t start_ticks;
  bool main;
  uint32_t capture;
  uint32_t tail_name_id;
};
// The drain: appends the segments from number `from` on to *out; returns the next number. The
// oldest are forgotten after kSegmentsKept (an event older than that goes by the oldest kept).
// *known_until: a tick read under the same lock as every segment's start, so a segment not
// among them starts after it: the segments read decide where any event up to it goes.
constexpr size_t kSegmentsKept = 4096;
size_t segments_since(size_t from, std::vector<Segment>* out, uint64_t* known_until);

// The track the step ranges are written on: a thread id no OS thread has (Linux's are < 2^22),
// named "ProfilerStep". Its own track keeps every thread's ranges properly nested whatever the
// program wraps its iterations in.
constexpr uint32_t kStepTrackTid = 0x7ffffff0;

}  // namespace fqntrace::steps

// Training steps: the step counter, the step window (FQNTRACE_STEPS) and the `ProfilerStep#N`
// ranges. A step ends at every optimizer step (the Python package's global optimizer hook) or
// at fqntrace::step(). The counter runs whether or not a step is recorded, so numbering stays
// right; outside the window the observer's callback is removed (the cost of tracing off).
#pragma once
#include <cstdint>

#include "plugin/step_window.h"

namespace fqntrace::steps {

// Session start (session.cpp), after the tick source is chosen: step 0 begins now. Returns
// whether step 0 is recorded (the session installs the callback only then).
bool begin_session(const StepWindow& window);

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

// The track the step ranges are written on: a thread id no OS thread has (Linux's are < 2^22),
// named "ProfilerStep". Its own track keeps every thread's ranges properly nested whatever the
// program wraps its iterations in.
constexpr uint32_t kStepTrackTid = 0x7ffffff0;

}  // namespace fqntrace::steps

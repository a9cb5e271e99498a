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

// Observer side: a step range was written ending at `ticks`; the next step begins there.
void step_range_written(uint64_t ticks);

}  // namespace fqntrace::steps

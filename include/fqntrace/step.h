// fqntrace — training steps for loops without a torch.optim optimizer.
//
//   for (int i = 0; i < n; ++i) {
//     train_one_batch();
//     fqntrace::step();   // ends ProfilerStep#i
//   }
//
// Every call ends the current step: the trace gets a `ProfilerStep#N` range (as Kineto writes
// it) and FQNTRACE_STEPS=A:B[:P] decides which steps are recorded. Python programs that use a
// torch.optim optimizer need nothing: its step() ends the step. Does nothing when not tracing.
#pragma once

namespace fqntrace {

void step();

// Records the next `steps` steps into a capture file of their own beside the trace
// (`run.capture-1.json` for `run.json`; docs/on-demand.md), whether the job is armed
// (FQNTRACE_STEPS=demand) or traced. false when not tracing, steps is 0, or a capture is already
// under way.
bool capture(unsigned steps);

}  // namespace fqntrace

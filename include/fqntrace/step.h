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

}  // namespace fqntrace

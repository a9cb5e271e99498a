// fqntrace::step(), the C++ API's step boundary (include/fqntrace/step.h).
#include "fqntrace/step.h"

#include "plugin/steps.h"

namespace fqntrace {

void step() {
  try {
    steps::end_step(/*at_enclosing_end=*/false);
  } catch (...) {
    // Never let tracing break the program: a step that could not end is only a missing range.
  }
}

}  // namespace fqntrace

// fqntrace::step() and fqntrace::capture(), the C++ API's steps (include/fqntrace/step.h).
#include "fqntrace/step.h"

#include <string>

#include "plugin/session.h"
#include "plugin/steps.h"

namespace fqntrace {

void step() {
  try {
    steps::end_step(/*at_enclosing_end=*/false);
  } catch (...) {
    // Never let tracing break the program: a step that could not end is only a missing range.
  }
}

bool capture(unsigned steps) {
  try {
    std::string why;
    return request_capture(steps, &why);
  } catch (...) {
    return false;  // as step(): nothing of ours reaches the program
  }
}

}  // namespace fqntrace

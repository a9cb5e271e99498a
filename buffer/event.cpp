#include "buffer/event.h"

namespace fqntrace {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::kForward:
      return "forward";
    case Phase::kBackward:
      return "backward";
    case Phase::kRecompute:
      return "recompute";
  }
  return "forward";
}

}  // namespace fqntrace

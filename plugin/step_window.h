// FQNTRACE_STEPS: which training steps are recorded. `A:B` records steps A..B-1; `A:B:P` records
// the steps whose number modulo P lies in A..B-1 (steps A..B-1 of every P). Pure functions, so
// the syntax is unit-testable (tests/cpp/step_window_test.cpp).
#pragma once
#include <cstdint>
#include <string>

namespace fqntrace {

struct StepWindow {
  uint64_t first = 0;
  uint64_t end = UINT64_MAX;  // one past the last recorded step (of each period)
  uint64_t period = 0;        // 0: no repetition

  bool all() const { return first == 0 && end == UINT64_MAX && period == 0; }
  static StepWindow none() { return StepWindow{0, 0, 0}; }
  bool contains(uint64_t step) const {
    uint64_t s = period != 0 ? step % period : step;
    return s >= first && s < end;
  }
};

// Parses `text` (A:B or A:B:P, whole numbers, A < B, B <= P). false with *problem set when the
// value is malformed; *window is then left as "every step".
bool parse_step_window(const std::string& text, StepWindow* window, std::string* problem);

// The whole FQNTRACE_STEPS value: a window, `demand` (armed for captures, docs/on-demand.md), or
// both separated by a comma (`0:1:50,demand`). *armed tells whether `demand` was given; without a
// window *window is every step. false with *problem when malformed (*window every step, *armed
// false).
bool parse_steps_setting(const std::string& text, StepWindow* window, bool* armed,
                         std::string* problem);

}  // namespace fqntrace

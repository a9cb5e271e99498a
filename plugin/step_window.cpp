#include "plugin/step_window.h"

#include <vector>

namespace fqntrace {
namespace {

// A whole number of at most 18 digits (no sign, no spaces); false otherwise.
bool parse_count(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

}  // namespace

bool parse_step_window(const std::string& text, StepWindow* window, std::string* problem) {
  *window = StepWindow{};
  std::vector<std::string> parts;
  size_t pos = 0;
  for (;;) {
    size_t colon = text.find(':', pos);
    parts.push_back(text.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos));
    if (colon == std::string::npos) break;
    pos = colon + 1;
  }
  if (parts.size() < 2 || parts.size() > 3) {
    *problem = "expected FIRST:END or FIRST:END:PERIOD";
    return false;
  }
  uint64_t first = 0, end = 0, period = 0;
  if (!parse_count(parts[0], &first) || !parse_count(parts[1], &end) ||
      (parts.size() == 3 && !parse_count(parts[2], &period))) {
    *problem = "expected whole numbers FIRST:END or FIRST:END:PERIOD";
    return false;
  }
  if (end <= first) {
    *problem = "END must be greater than FIRST (steps FIRST..END-1 are recorded)";
    return false;
  }
  if (parts.size() == 3 && (period == 0 || end > period)) {
    *problem = "PERIOD must be at least END (steps FIRST..END-1 of every PERIOD)";
    return false;
  }
  window->first = first;
  window->end = end;
  window->period = period;
  return true;
}

bool parse_steps_setting(const std::string& text, StepWindow* window, bool* armed,
                         std::string* problem) {
  *window = StepWindow{};
  *armed = false;
  bool have_window = false;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (item == "demand" && !*armed) {
      *armed = true;
    } else if (!have_window && item != "demand" && parse_step_window(item, window, problem)) {
      have_window = true;
    } else {
      if (item == "demand" || have_window)
        *problem = "expected at most one window and one 'demand'";
      *window = StepWindow{};
      *armed = false;
      return false;
    }
  }
  return true;
}

}  // namespace fqntrace

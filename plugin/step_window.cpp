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

}  // namespace fqntrace

#include "plugin/log.h"

#include <unistd.h>

namespace fqntrace {

void log_line(const std::string& message) {
  // One line whatever the message quotes (a value with a newline would split it).
  std::string line = "fqntrace: ";
  for (char c : message) {
    if (c == '\n') {
      line += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20 && c != '\t') {
      line += "?";
    } else {
      line.push_back(c);
    }
  }
  line += "\n";
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

void log_bad_env(const std::string& value, const std::string& problem, const std::string& fix) {
  log_line("FQNTRACE=" + value + ": " + problem + "; tracing is off. " + fix);
}

}  // namespace fqntrace

#include "plugin/log.h"

#include <unistd.h>

namespace fqntrace {

void log_line(const std::string& message) {
  std::string line = "fqntrace: " + message + "\n";
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

void log_bad_env(const std::string& value, const std::string& problem, const std::string& fix) {
  log_line("FQNTRACE=" + value + ": " + problem + "; tracing is off. " + fix);
}

}  // namespace fqntrace

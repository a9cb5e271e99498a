// One-line diagnostics on stderr. Every message starts with "fqntrace: " and is written with a
// single write(2) so lines from several threads or processes never interleave.
#pragma once
#include <string>

namespace fqntrace {

void log_line(const std::string& message);

// For problems with the FQNTRACE value: names the variable, the value, the problem and the fix.
void log_bad_env(const std::string& value, const std::string& problem, const std::string& fix);

}  // namespace fqntrace

// Helpers shared by the C++ tests: temporary directories, sessions to a file, parsing traces
// back, and running child processes.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fqntrace::testing {

std::string make_temp_dir();

// Starts a session writing to `path` (Chrome format unless it ends in .jsonl); fails the test
// on error.
void start_tracing(const std::string& path);
// Stops the session and returns the parsed Chrome trace.
nlohmann::json stop_and_load(const std::string& path);

// X events of the trace, in file order.
std::vector<nlohmann::json> slices(const nlohmann::json& trace);

struct ChildResult {
  int exit_code = -1;
  std::string stderr_text;
};
// Runs argv with the extra environment (name → value; a value of "\x01unset" removes it).
ChildResult run_child(const std::vector<std::string>& argv,
                      const std::map<std::string, std::string>& env);

std::vector<std::string> lines_of(const std::string& text);

}  // namespace fqntrace::testing

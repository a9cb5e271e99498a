#include "tests/cpp/test_util.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "plugin/config.h"
#include "plugin/session.h"

extern char** environ;

namespace fqntrace::testing {

void start_tracing(const std::string& path) {
  ConfigResult r = parse_config(
      path.c_str(), [](const char*) -> const char* { return nullptr; }, getpid());
  ASSERT_TRUE(r.config.has_value()) << r.problem;
  std::string error;
  ASSERT_TRUE(start_session(*r.config, &error)) << error;
}

nlohmann::json stop_and_load(const std::string& path) {
  EXPECT_TRUE(stop_session());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

std::vector<nlohmann::json> slices(const nlohmann::json& trace) {
  std::vector<nlohmann::json> out;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.value("ph", "") == "X") out.push_back(e);
  }
  return out;
}

ChildResult run_child(const std::vector<std::string>& argv,
                      const std::map<std::string, std::string>& env) {
  ChildResult result;
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return result;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], STDERR_FILENO);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    for (const auto& [name, value] : env) {
      if (value == "\x01unset") {
        unsetenv(name.c_str());
      } else {
        setenv(name.c_str(), value.c_str(), 1);
      }
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execve(args[0], args.data(), environ);
    _exit(127);
  }
  close(pipe_fds[1]);
  char buf[4096];
  ssize_t n;
  while ((n = read(pipe_fds[0], buf, sizeof(buf))) > 0) result.stderr_text.append(buf, n);
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

}  // namespace fqntrace::testing

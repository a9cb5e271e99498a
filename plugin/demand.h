// The demand thread (docs/on-demand.md): for an armed process (FQNTRACE_STEPS=demand) or one with
// the slow-step trigger, it publishes the status record beside the trace about once a second,
// and reads the folder's capture request (once a second, and at once when inotify says the file
// changed) and answers it. All its file-system work happens on this thread, which nothing ever
// waits for beyond a bound: a hung or read-only file system stops the status record, never the
// training loop or the process's exit.
#pragma once
#include <string>

namespace fqntrace::demand {

struct Identity {
  long pid = 0;
  std::string host;
  int rank = 0;
  int world_size = 1;
  std::string pattern;  // FQNTRACE as given
  std::string trace;    // the main output's path (as configured: relative paths stay relative)
  std::string cwd;
  double started = 0;  // wall clock, seconds since the epoch
  std::string window;  // FQNTRACE_STEPS' window, "" when none
  double slow = 0;     // FQNTRACE_CAPTURE_SLOW, 0: off
};

// Starts the thread for this session (a previous session's thread is told to end first).
void start(const Identity& identity);
// The trace moved (the rank became known): the status record follows it.
void moved(const std::string& trace, int rank, int world_size);
// Asks the thread to remove its files and end; waits for it at most a short bound.
void stop();

}  // namespace fqntrace::demand

// Parsing and checking the FQNTRACE value. Pure functions over an explicit environment so the
// rules are unit-testable. Both ways to start a session build their config with
// config_from_value(): the environment at load time (autostart) and fqntrace.profile(path).
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "plugin/step_window.h"

namespace fqntrace {

enum class Format { kChrome, kJsonLines };

// One output of a session: a format and the file it goes to.
struct Output {
  enum class Kind { kChrome, kJsonLines } kind;
  std::string path;
};

struct Config {
  std::string raw_value;  // FQNTRACE as given
  std::string path;       // placeholders expanded
  Format format = Format::kChrome;
  std::vector<Output> outputs;  // the main one (from the extension) first, then FQNTRACE_FORMATS'
  std::string stem;             // every output's path is this plus its own ending
  // FQNTRACE_FORMATS=summary: <stem>.summary.json, written by the Python package from the
  // finished trace (python/fqntrace/_summary_file.py), never by the library (plugin/session.h).
  bool summary = false;
  bool flops = false;  // FQNTRACE_FLOPS=1: ask for op inputs to count FLOPs (every op then pays)
  bool monotonic_clock =
      false;            // FQNTRACE_CLOCK=monotonic: clock_gettime even where the TSC would do
  bool shapes = false;  // FQNTRACE_SHAPES=1: Kineto's "Input Dims" / "Input type" args
  bool memory = false;  // FQNTRACE_MEMORY=1: the allocator's reports (docs/memory.md)
  // FQNTRACE_MODULE_RANGES=1: module scopes are also `nn.Module: <fqn>` RecordFunction ranges,
  // which torch.profiler then shows; by default they are frames only fqntrace sees.
  bool module_ranges = false;
  bool module_spans = true;  // FQNTRACE_MODULE_SPANS=0: no backward/recompute module tracks
  bool cpu_time = false;     // FQNTRACE_CPU=1: thread CPU time (plugin/thread_cpu.h)
  // FQNTRACE_SAMPLE=p (0 < p <= 1): each op is recorded with probability p, through torch's own
  // sampling; module scopes, steps, user scopes and backward nodes stay complete. 1: every op.
  double sample = 1.0;
  StepWindow steps;  // FQNTRACE_STEPS: the steps recorded (default: all)
  // FQNTRACE_STEPS=demand (alone, or beside a window: `A:B:P,demand`): armed for captures
  // (docs/on-demand.md). Alone, nothing is recorded into the trace file, which is not written.
  bool armed = false;
  bool trace_file = true;  // the main outputs are written (false: `demand` alone)
  // FQNTRACE_CAPTURE_SLOW=X (> 1): a step slower than X times the recent median starts a capture
  // of the next capture_steps steps, at most capture_max times per process. 0: off.
  double capture_slow = 0.0;
  uint32_t capture_steps = 3;  // FQNTRACE_CAPTURE_STEPS
  uint32_t capture_max = 5;    // FQNTRACE_CAPTURE_MAX
  int rank = 0;
  int world_size = 1;
  bool rank_given = false;  // RANK was set at start; otherwise the process group may tell it later
  std::string warning;      // a bad value that does not stop tracing (FQNTRACE_STEPS), or empty
  std::string note;         // an informational line to print once (e.g. rank inserted), or empty
  // Values that were ignored (tracing goes on without them): one stderr line each.
  std::vector<std::string> warnings;
  // Started by inheritance: FQNTRACE came unchanged from a traced parent process (see
  // kParentVariable), so the path got `.pid<PID>` unless the value has {pid} (docs/reliability.md).
  bool inherited = false;
};

// A process tracing from FQNTRACE sets this to "<its pid>:<its FQNTRACE value>" in its
// environment. A child that sees another pid there with its own FQNTRACE unchanged inherited it,
// and writes its own file instead of its parent's; a child given a new FQNTRACE is not affected.
inline constexpr const char* kParentVariable = "FQNTRACE_PARENT";

struct ConfigResult {
  std::optional<Config> config;  // set when tracing should start
  std::string problem;           // set when the value is bad: what is wrong
  std::string fix;               // ... and what to do about it
};

using EnvLookup = std::function<const char*(const char*)>;

// value == nullptr or "" → neither config nor problem (tracing is simply off).
ConfigResult parse_config(const char* value, const EnvLookup& env, long pid);

// Checks that the expanded path can be written: not a directory, parent exists and is writable.
// Returns the problem (empty when fine) and fills `fix`.
std::string check_path_writable(const std::string& path, std::string* fix);

// parse_config, then check_path_writable on the expanded path: the config a session starts with.
ConfigResult config_from_value(const char* value, const EnvLookup& env, long pid);

// Marks this process as the traced parent for every child it starts (setenv, before any
// thread of ours runs: called right after an environment-started session starts).
void mark_traced_parent(long pid, const std::string& value);

// config_from_value with FQNTRACE, the real environment and this process.
ConfigResult config_from_environment();

}  // namespace fqntrace

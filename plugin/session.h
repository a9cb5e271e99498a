// The tracing session: at most one per process. Starting installs the observer and a drain
// thread that moves events from the per-thread rings to the exporters; stopping (explicitly,
// or at process exit) drains everything and completes the files.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "drain/device_events.h"
#include "plugin/config.h"

namespace fqntrace {

// false with *error when a session is already running or the output cannot be opened.
bool start_session(const Config& config, std::string* error);
// Drains and finishes the files. Safe to call when nothing runs. Returns false if the trace
// could not be written completely (the reason was logged).
bool stop_session();
bool session_running();
// Records the process group once init_process_group ran: the trace header's distributedInfo
// (backend; rank and world size too) is filled in place. A process that started without RANK
// (an mp.spawn child) learns its rank only now: its files are renamed to the names its rank
// gives (`mps.{rank}.json`: `mps.0.pid<PID>.json` → `mps.1.pid<PID>.json`).
void set_session_process_group(const std::string& backend, int rank, int world_size);
// Steps (plugin/steps.cpp): installs or removes the observer's callback as the step window or a
// capture wants it now (steps::recording_wanted). The session keeps running either way.
void update_session_recording();
// fqntrace.capture(steps=N) / fqntrace::capture(): the next `steps` steps are recorded into a
// capture file of their own (docs/on-demand.md). false with *why when no session runs or a
// capture is already under way.
bool request_capture(uint64_t steps, std::string* why);
// torch.profiler starts (true) or stops (false) recording: while any recording runs, the
// callback asks RecordFunction for ids (one atomic increment per range, in torch) so every event
// carries the handle Kineto writes as "Record function id" (python/fqntrace/_kineto_hook.py).
void set_record_function_ids(bool on);
// What fqntrace attributed to one RecordFunction (strings are interned: they never move).
struct RangeAttribution {
  uint64_t rf_id;
  const std::string* fqn;
  const std::string* module_type;  // fqntrace's module scopes, else nullptr
  const char* phase;
};
// Every range ended since the current (or last) torch.profiler recording started, after
// draining everything recorded so far.
std::vector<RangeAttribution> record_function_attribution();
// FQNTRACE_DEVICE: a recording's device events, joined to their ops (python/fqntrace/
// _device_time.py), go to the trace file (`main`) and/or the capture `capture` (0: none) if its
// file is still open, with the recording's counts. A capture's file is completed once its device
// events are in. false when nothing took them.
bool add_device_events(bool main, uint32_t capture, const std::vector<DeviceEvent>& events,
                       const DeviceCounts& counts);
// FQNTRACE_DEVICE's collector starts recording for the capture `capture`: its file waits for
// add_device_events (at most 30 s after the capture ends).
void expect_device_events(uint32_t capture);
// Drain now and push bytes to the OS (tests and fqntrace.flush()).
void flush_session();

// FQNTRACE_FORMATS=summary: the library writes no summary. <stem>.summary.json is the CLI's
// `summary --json` of the finished trace, which only the Python package can compute; it writes
// it after the session stops (python/fqntrace/_summary_file.py). The binding registers the
// package when it is imported; a session that finishes a trace while nobody is registered (a
// C++ program) says in one line on stderr how to get the summary.
void register_summary_writer();
struct SummaryDue {
  std::string trace;    // a finished trace: the session's, or a capture's
  std::string summary;  // where its summary goes
};
// The summaries due since the last call, for the registered writer to write.
std::vector<SummaryDue> take_summaries_due();

}  // namespace fqntrace

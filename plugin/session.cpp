#include "plugin/session.h"

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "buffer/buffer_registry.h"
#include "buffer/intern.h"
#include "buffer/ticks.h"
#include "drain/drainer.h"
#include "exporters/exporter.h"
#include "exporters/json_text.h"
#include "plugin/captures.h"
#include "plugin/demand.h"
#include "plugin/device_use.h"
#include "plugin/log.h"
#include "plugin/memory_reporter.h"
#include "plugin/observer.h"
#include "plugin/session_state.h"
#include "plugin/steps.h"

#ifndef FQNTRACE_VERSION
#define FQNTRACE_VERSION "dev"
#endif

namespace fqntrace {

namespace {

using namespace std::chrono_literals;
constexpr auto kDrainPeriod = 20ms;
constexpr auto kFlushPeriod = 500ms;  // "flushed at least once a second"

// The drain thread runs kDrainNiceIncrement nice levels below the process, so that when every
// core is busy (a DDP rank per core) the program's threads win the CPU and the drain catches up
// in their gaps; a woken drain thread no longer preempts them. Not lower: under two busy-loop
// hogs on 2 cores, a tiny-op loop (the fastest event source) dropped no event at +5, 3 % of its
// events at +10 and 74 % at +19 (docs/history/experiments/drain_nice.py, docs/benchmarks.md).
// Best effort: a failure leaves the priority as it was.
constexpr int kDrainNiceIncrement = 5;

void lower_drain_priority() {
  pid_t tid = static_cast<pid_t>(::syscall(SYS_gettid));
  errno = 0;
  int nice = ::getpriority(PRIO_PROCESS, static_cast<id_t>(tid));  // -1 is a valid nice value
  if (errno != 0) return;
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(tid), std::min(19, nice + kDrainNiceIncrement));
}

std::string read_process_name() {
  std::ifstream comm("/proc/self/comm");
  std::string name;
  std::getline(comm, name);
  return name.empty() ? "process" : name;
}

// SIGTERM (torchrun's agent stopping a worker, a scheduler's kill): the handler asks the drain
// thread to write out everything recorded, waits for it a bounded time, then lets SIGTERM do
// what it would have done. Only async-signal-safe calls in the handler: atomics, nanosleep,
// sigaction, raise. Installed only over the default action, never over the program's handler.
constexpr int kTermFlushWaitMs = 500;  // the drain thread wakes every 20 ms: ample, yet bounded
std::atomic<uint32_t> g_flush_requests{0};
std::atomic<uint32_t> g_flushes_done{0};
std::atomic<bool> g_drain_alive{false};
// FQNTRACE_DEVICE: the capture whose device events Kineto is recording (0: none), which its
// file waits for (expect_device_events).
std::atomic<uint32_t> g_device_capture{0};
struct sigaction g_default_term {};

void flush_then_terminate(int signal_number) {
  uint32_t wanted = g_flush_requests.fetch_add(1, std::memory_order_acq_rel) + 1;
  const timespec poll{0, 2 * 1000 * 1000};
  for (int waited = 0;
       waited < kTermFlushWaitMs / 2 && g_drain_alive.load(std::memory_order_acquire) &&
       g_flushes_done.load(std::memory_order_acquire) < wanted;
       ++waited) {
    nanosleep(&poll, nullptr);
  }
  sigaction(signal_number, &g_default_term, nullptr);
  raise(signal_number);  // delivered when this handler returns: the process ends as it would have
}

void install_term_flush() {
  struct sigaction current {};
  if (sigaction(SIGTERM, nullptr, &current) != 0 || current.sa_handler != SIG_DFL ||
      (current.sa_flags & SA_SIGINFO) != 0) {
    return;  // the program handles (or ignores) SIGTERM itself and ends through its own path
  }
  g_default_term = current;
  struct sigaction ours {};
  ours.sa_handler = flush_then_terminate;
  sigemptyset(&ours.sa_mask);
  ours.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &ours, nullptr);
}

std::unique_ptr<Exporter> make_exporter(Output::Kind kind) {
  return kind == Output::Kind::kChrome ? make_chrome_trace_exporter() : make_json_lines_exporter();
}

std::atomic<bool> g_summary_writer{false};  // the Python package writes the summaries
std::mutex g_summaries_mu;
std::vector<SummaryDue> g_summaries_due;  // guarded by g_summaries_mu

// `trace` is complete and FQNTRACE_FORMATS asked for its summary: queued for the package, or,
// in a program without it, the one line that says how to make it.
void summary_due(const std::string& trace, const std::string& summary) {
  if (!g_summary_writer.load(std::memory_order_acquire)) {
    log_line(
        "FQNTRACE_FORMATS=summary: " + summary +
        " is written by the fqntrace Python package, "
        "not by this program; make it from the trace with `python -m fqntrace summary --json " +
        trace + " > " + summary + "`. The other outputs are written.");
    return;
  }
  std::lock_guard<std::mutex> lock(g_summaries_mu);
  g_summaries_due.push_back({trace, summary});
}

// The capture header's fields after `{"index": ` (docs/on-demand.md).
void json_append_capture_fields(std::string& out, const captures::Capture& c,
                                uint32_t file_number) {
  json::append_uint(out, c.index);
  out += ", \"file_number\": ";
  json::append_uint(out, file_number);
  out += ", \"id\": ";
  json::append_string(out, c.id);
  out += ", \"reason\": ";
  json::append_string(out, c.reason);
  out += ", \"first_step\": ";
  json::append_uint(out, c.first_step);
  out += ", \"steps\": ";
  json::append_uint(out, c.steps);
  if (c.seconds > 0) {
    out += ", \"seconds\": ";
    json::append_uint(out, static_cast<uint64_t>(c.seconds * 1000 + 0.5));
    out += "e-3";
  }
  if (c.memory) out += ", \"memory\": true";
  out += "}";
}

struct Session {
  Config config;
  TraceInfo info;
  std::unique_ptr<Drainer> drain;  // owns the exporters; guarded by drain_mu
  observer::Callbacks callback;
  bool callback_installed = false;
  bool callback_inputs = false;  // the callback asks the dispatcher for op inputs
  uint64_t dropped_before = 0;   // the process-wide drop count when this session started
  bool summary_dropped = false;  // writing failed: the one failure line said so

  std::thread drain_thread;

  // Captures (docs/on-demand.md), all on the drain thread: the recording state's segments
  // (steps::Segment) as the drain has read them, and the capture whose file is open.
  std::vector<steps::Segment> segments;
  size_t next_segment = 0;
  uint64_t segments_known_until = 0;  // segments_since's tick: no segment unread starts before
  uint32_t captures_opened = 0;       // the last capture index a file was opened (or failed) for
  struct OpenCapture {
    uint32_t index = 0;        // 0: none open
    uint32_t file_number = 0;  // its files' number (capture_path)
    std::unique_ptr<Drainer> drain;
    bool ended = false;         // a later segment has begun
    uint32_t tail_name_id = 0;  // its last step's range, awaited before the file is completed
    bool tail_seen = false;
    std::chrono::steady_clock::time_point ended_at;
    uint64_t dropped_before = 0;
  } capture;
  uint32_t next_capture_file = 1;  // capture files are numbered from 1, skipping existing ones
  std::string stem;                // every output's path is stem + its own ending
  std::vector<std::string> output_paths;

  std::mutex drain_mu;  // one thread at a time touches the drain
  std::chrono::steady_clock::time_point last_flush = std::chrono::steady_clock::now();

  // Caller holds drain_mu.
  void drain_all() {
    drain->begin_batch();  // before any event of this batch: see TickConverter
    read_segments();
    try {
      open_capture_if_started();
    } catch (...) {  // out of memory opening a capture: that capture fails, tracing goes on
      if (capture.index != 0)
        captures::set_state(capture.index, captures::State::kFailed, "", "internal error");
      capture = OpenCapture{};
    }
    if (capture.drain) capture.drain->begin_batch();
    if (segments.size() == 1 && segments[0].main && segments[0].capture == 0) {
      // Every event goes to the trace file (a full trace, or inside a window that has not closed).
      session_state::buffers().for_each_and_reap([&](ThreadBuffer& b) { drain->drain(b); });
    } else {
      Drainer::Route route = [this](const RawEvent& e) { return route_event(e); };
      session_state::buffers().for_each_and_reap(
          [&](ThreadBuffer& b) { drain->drain_routed(b, capture.drain.get(), route); });
    }
    finish_capture_if_complete(false);
  }

  void read_segments() {
    next_segment = steps::segments_since(next_segment, &segments, &segments_known_until);
    trim_segments();
  }

  // Where an event goes: the segment its start lies in (nearly always the last one). An event
  // that started after the segments were read may lie in one pushed since (a capture's steps
  // ended while the drain was behind): they are read again first, else the steps after a
  // capture went into its file. A capture that began since is opened at the next batch, so its
  // events before that go to the trace file only, as they did.
  unsigned route_event(const RawEvent& e) {
    uint64_t start = e.kind == EventKind::kMemory ? e.memory.ts : e.range.start_ns;
    if (start > segments_known_until) read_segments();
    size_t i = segments.size();
    while (i > 1 && segments[i - 1].start_ticks > start) --i;
    const steps::Segment& seg = segments[i - 1];
    unsigned to = seg.main && config.trace_file ? 1u : 0u;
    if (seg.capture != 0 && seg.capture == capture.index) {
      to |= 2u;
      if (capture.tail_name_id != 0 && e.kind == EventKind::kUserScope &&
          e.range.name_id == capture.tail_name_id) {
        capture.tail_seen = true;
      }
    }
    return to;
  }

  // Only the last segments are looked up: an event reaches the drain within a round or two of
  // its start, and a capture spans a few segments. The last 64 are kept once 128 piled up.
  void trim_segments() {
    size_t keep = 64;
    if (segments.size() <= 2 * keep) return;
    segments.erase(segments.begin(), segments.end() - static_cast<long>(keep));
  }

  // A segment of a capture not seen before: its file opens now, before any of its events is
  // delivered. A failure fails the capture (one line) and the job runs on.
  void open_capture_if_started() {
    for (const steps::Segment& seg : segments) {
      if (seg.capture == 0 || seg.capture <= captures_opened) continue;
      if (capture.drain) finish_capture_if_complete(true);  // one capture at a time
      captures_opened = seg.capture;
      open_capture(seg.capture);
    }
    if (capture.index == 0) return;
    // The capture has ended once a later segment is not its own.
    bool in_it = false;
    for (const steps::Segment& seg : segments) {
      if (seg.capture == capture.index) {
        in_it = true;
      } else if (in_it && !capture.ended) {
        capture.ended = true;
        capture.tail_name_id = seg.tail_name_id;
        capture.ended_at = std::chrono::steady_clock::now();
        captures::set_state(capture.index, captures::State::kWriting);
      }
    }
  }

  std::string capture_path(const std::string& output_path, uint32_t number) const {
    return stem + ".capture-" + std::to_string(number) + output_path.substr(stem.size());
  }

  void open_capture(uint32_t index) {
    captures::Capture c;
    if (!captures::find(index, &c)) return;
    for (;; ++next_capture_file) {  // never over an earlier run's capture
      bool taken = false;
      for (const std::string& path : output_paths)
        taken |= ::access(capture_path(path, next_capture_file).c_str(), F_OK) == 0;
      if (!taken) break;
    }
    uint32_t number = next_capture_file++;
    TraceInfo capture_info = info;
    capture_info.memory = config.memory || c.memory;
    std::string header = "{\"index\": ";
    json_append_capture_fields(header, c, number);
    capture_info.capture_json = header;
    std::vector<std::unique_ptr<Exporter>> exporters;
    std::string error;
    for (size_t i = 0; i < config.outputs.size(); ++i) {
      std::unique_ptr<Exporter> ex = make_exporter(config.outputs[i].kind);
      TraceInfo output_info = capture_info;
      output_info.path = capture_path(output_paths[i], number);
      if (!ex->open(output_info, &error)) {
        captures::set_state(index, captures::State::kFailed, "", error);
        log_line("capture " + std::to_string(index) + " not written: " + error +
                 "; the job runs on.");
        return;
      }
      exporters.push_back(std::move(ex));
    }
    capture = OpenCapture{};
    capture.index = index;
    capture.file_number = number;
    capture.drain =
        std::make_unique<Drainer>(std::move(exporters), info.mono_origin_ns, config.shapes,
                                  config.module_spans, config.sample < 1.0);
    capture.drain->start_clock();
    capture.dropped_before = session_state::buffers().dropped_total();
    captures::set_state(index, captures::State::kRecording, capture_path(output_paths[0], number));
  }

  // The capture's steps are over and its last step's range is in (or it was timed, or waited
  // for long enough): the file is completed. `now`: at once (the session stops, or the next
  // capture starts).
  void finish_capture_if_complete(bool now) {
    if (!capture.drain) return;
    using namespace std::chrono_literals;
    auto waited = std::chrono::steady_clock::now() - capture.ended_at;
    bool complete = capture.ended && waited >= 2 * kDrainPeriod &&
                    (capture.tail_name_id == 0 || capture.tail_seen || waited >= 2s);
    // FQNTRACE_DEVICE: a capture Kineto records for gets its device events at the step that ends
    // it (python/fqntrace/_device_time.py); a program that never gets there, the file without.
    bool device_due = g_device_capture.load(std::memory_order_acquire) == capture.index;
    complete = complete && (!device_due || waited >= 30s);
    if (!now && !complete) return;
    std::string error;
    bool ok = capture.drain->flush(&error);
    uint64_t dropped = session_state::buffers().dropped_total() - capture.dropped_before;
    std::vector<std::string> errors = capture.drain->finish(dropped, device_use::current());
    if (!ok) errors.insert(errors.begin(), error);
    if (errors.empty()) {
      captures::set_state(capture.index, captures::State::kDone);
      if (config.summary) {
        summary_due(capture_path(output_paths[0], capture.file_number),
                    capture_path(stem + ".summary.json", capture.file_number));
      }
    } else {
      captures::set_state(capture.index, captures::State::kFailed, "", errors[0]);
      log_line("capture " + std::to_string(capture.index) +
               " not written completely: " + errors[0] + "; the job runs on.");
    }
    capture = OpenCapture{};
  }

  // Caller holds drain_mu.
  void flush_all() {
    last_flush = std::chrono::steady_clock::now();
    std::string error;
    if (!drain->flush(&error)) on_write_failure(error);
    if (capture.drain && !capture.drain->flush(&error)) {
      captures::set_state(capture.index, captures::State::kFailed, "", error);
      log_line("capture " + std::to_string(capture.index) + " not written: " + error +
               "; the job runs on.");
      capture = OpenCapture{};
    }
  }

  void on_write_failure(const std::string& error) {
    drain->fail();
    session_state::set_running(false);
    log_bad_env(config.raw_value, error + summary_not_written(),
                "Free disk space or set FQNTRACE to a path on another file system.");
  }

  // The summary is made from the finished trace: a trace whose writing failed gets none. The
  // words that tell the user, in the one failure line.
  std::string summary_not_written() {
    if (!config.summary || summary_dropped) return "";
    summary_dropped = true;
    return "; " + stem + ".summary.json not written";
  }

  void drain_loop() {
    // SIGTERM goes to another thread, whose handler waits for this one (install_term_flush).
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, nullptr);
    for (;;) {
      if (session_state::wait_for_drain(kDrainPeriod)) return;  // stop_session() drains last
      std::lock_guard<std::mutex> lock(drain_mu);
      drain_all();
      uint32_t requested = g_flush_requests.load(std::memory_order_acquire);
      if (requested != g_flushes_done.load(std::memory_order_relaxed) ||
          std::chrono::steady_clock::now() - last_flush >= kFlushPeriod) {
        flush_all();
        g_flushes_done.store(requested, std::memory_order_release);
      }
    }
  }
};

std::mutex g_lifecycle_mu;
Session* g_session = nullptr;
// torch.profiler recordings under way (set_record_function_ids): while > 0 the callback asks
// RecordFunction for ids, so each event carries the handle Kineto writes as "Record function id".
int g_id_requests = 0;
bool g_forked_child = false;
std::once_flag g_process_hooks_once;

void stop_at_exit() { stop_session(); }

void on_fork_child() {
  // The child has no drain thread and must never write the parent's file.
  g_forked_child = true;
  g_drain_alive.store(false, std::memory_order_relaxed);  // SIGTERM must not wait for it here
  session_state::set_running(false);
  memory::set_enabled(false);  // the allocator stops asking our reporter (and its own table)
  g_session = nullptr;
}

std::string window_text(const StepWindow& w) {
  if (w.all() || w.end == 0) return "";
  return std::to_string(w.first) + ":" + std::to_string(w.end) +
         (w.period != 0 ? ":" + std::to_string(w.period) : "");
}

demand::Identity demand_identity(const Session& s) {
  demand::Identity id;
  id.pid = s.info.pid;
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) == 0) id.host = host;
  id.rank = s.info.rank;
  id.world_size = s.info.world_size;
  id.pattern = s.config.raw_value;
  id.trace = s.output_paths[0];  // the main output's: config.outputs is never empty
  char cwd[4096] = {};
  if (::getcwd(cwd, sizeof(cwd) - 1) != nullptr) id.cwd = cwd;
  id.started = static_cast<double>(wall_ns()) / 1e9;
  id.window = window_text(s.config.steps);
  id.slow = s.config.capture_slow;
  return id;
}

}  // namespace

bool start_session(const Config& config, std::string* error) {
  std::lock_guard<std::mutex> lock(g_lifecycle_mu);
  if (g_forked_child) {
    *error = "tracing cannot start in a forked child of a traced process";
    return false;
  }
  if (g_session != nullptr) {
    *error = "already tracing to " + g_session->config.path;
    return false;
  }
  auto session = std::make_unique<Session>();
  session->config = config;
  TraceInfo& info = session->info;
  info.path = config.path;
  info.trace_name = config.raw_value;
  info.pid = ::getpid();
  info.rank = config.rank;
  info.world_size = config.world_size;
  info.process_name = read_process_name();
  info.version = FQNTRACE_VERSION;
  info.memory = config.memory;
  info.sample = config.sample;
  info.sample_spans = config.sample < 1.0 && config.module_spans;
  uint64_t wall = wall_ns();
  uint64_t mono = monotonic_ns();
  info.base_time_ns = wall - wall % 1000000000ull;  // a whole second, as Kineto does
  info.mono_origin_ns = mono - (wall - info.base_time_ns);

  std::vector<std::unique_ptr<Exporter>> exporters;
  for (const Output& output : config.outputs) {
    session->output_paths.push_back(output.path);
    if (!config.trace_file) continue;  // armed with no window: the captures alone are written
    std::unique_ptr<Exporter> ex = make_exporter(output.kind);
    TraceInfo output_info = info;
    output_info.path = output.path;
    if (!ex->open(output_info, error)) return false;
    exporters.push_back(std::move(ex));
  }
  session->stem = config.stem;
  session->drain =
      std::make_unique<Drainer>(std::move(exporters), info.mono_origin_ns, config.shapes,
                                config.module_spans, config.sample < 1.0);

  // Events left in a thread's ring by an earlier session are not this session's.
  session_state::buffers().for_each_and_reap(
      [](ThreadBuffer& b) { b.ring.drain([](const RawEvent&) {}); });

  std::call_once(g_process_hooks_once, [] {
    std::atexit(stop_at_exit);
    pthread_atfork(nullptr, nullptr, on_fork_child);
    install_term_flush();
  });
  // Drops are counted process-wide; this session reports only its own.
  session->dropped_before = session_state::buffers().dropped_total();

  choose_tick_source(config.monotonic_clock);
  session->drain->start_clock();  // before the callback: the first event already has a map
  session_state::g_generation.fetch_add(1, std::memory_order_relaxed);
  session_state::set_running(true);
  session_state::g_shapes.store(config.shapes, std::memory_order_relaxed);
  session_state::g_module_ranges.store(config.module_ranges, std::memory_order_relaxed);
  session_state::g_cpu_time.store(config.cpu_time, std::memory_order_relaxed);
  session_state::g_sample.store(config.sample, std::memory_order_relaxed);
  session_state::g_module_spans.store(config.module_spans, std::memory_order_relaxed);
  // Op inputs cost every op (the dispatcher boxes its arguments), so only when something needs
  // them: FLOPs, shapes, or a distributed job (collectives' bytes and group size).
  session->callback_inputs = config.flops || config.shapes || config.world_size > 1;
  captures::reset();
  steps::SlowTrigger slow{config.capture_slow, config.capture_steps, config.capture_max};
  if (steps::begin_session(config.steps, slow)) {  // else the callback waits for the step window
    session->callback = observer::install(session->callback_inputs, g_id_requests > 0);
    session->callback_installed = true;
  }
  session_state::g_recording.store(session->callback_installed, std::memory_order_relaxed);
  memory::set_enabled(config.memory && session->callback_installed);
  Session* raw = session.release();
  session_state::allow_drain();
  g_drain_alive.store(true, std::memory_order_release);
  raw->drain_thread = std::thread([raw] {
    lower_drain_priority();  // before the name: whoever sees the name sees the priority
    pthread_setname_np(pthread_self(), "fqntrace-drain");
    raw->drain_loop();
  });
  g_session = raw;
  if (config.armed || config.capture_slow > 0) demand::start(demand_identity(*raw));
  return true;
}

bool stop_session() {
  // A forked child may have inherited the mutex locked: it owns no session, never wait for it.
  if (g_forked_child) return true;
  // Before our lock: the demand thread may be waiting for it to start or end a timed capture.
  demand::stop();  // bounded: a demand thread stuck in a hung file system is left behind
  std::lock_guard<std::mutex> lock(g_lifecycle_mu);
  if (g_session == nullptr) return true;
  std::unique_ptr<Session> session(g_session);
  g_session = nullptr;
  session_state::set_running(false);
  session_state::g_recording.store(false, std::memory_order_relaxed);
  memory::set_enabled(false);
  if (session->callback_installed) observer::uninstall(session->callback);
  session_state::stop_drain();
  if (session->drain_thread.joinable()) session->drain_thread.join();
  g_drain_alive.store(false, std::memory_order_release);

  std::lock_guard<std::mutex> drain_lock(session->drain_mu);
  session->drain_all();
  session->finish_capture_if_complete(true);  // a capture under way ends with the process
  session->flush_all();
  if (session->drain->failed()) return false;
  uint64_t dropped = session_state::buffers().dropped_total() - session->dropped_before;
  std::vector<std::string> errors = session->drain->finish(dropped, device_use::current());
  for (const std::string& error : errors) session->on_write_failure(error);
  bool ok = errors.empty();
  if (ok && session->config.summary && session->config.trace_file) {
    summary_due(session->output_paths[0], session->stem + ".summary.json");
  }
  if (dropped > 0) {
    log_line(
        "dropped " + std::to_string(dropped) +
        " events because the writer fell behind; the trace says so in fqntrace.dropped_events.");
  }
  return ok;
}

bool session_running() {
  std::lock_guard<std::mutex> lock(g_lifecycle_mu);
  return g_session != nullptr;
}

namespace {

// The outputs' paths had RANK and WORLD_SIZE been set to the group's at start: the stem the value
// gives then, with each output's own ending. The process has marked itself as the traced parent
// since, so whether it inherited FQNTRACE is said as it was.
std::vector<std::string> paths_for_group(const Config& config, int rank, int world_size) {
  const std::string rank_text = std::to_string(rank), world_text = std::to_string(world_size);
  const std::string parent_text = "0:" + config.raw_value;
  EnvLookup env = [&](const char* name) -> const char* {
    if (std::strcmp(name, "RANK") == 0) return rank_text.c_str();
    if (std::strcmp(name, "WORLD_SIZE") == 0) return world_text.c_str();
    if (std::strcmp(name, kParentVariable) == 0)
      return config.inherited ? parent_text.c_str() : nullptr;
    return std::getenv(name);
  };
  ConfigResult again = parse_config(config.raw_value.c_str(), env, ::getpid());
  std::vector<std::string> paths;
  if (!again.config) return paths;
  for (const Output& output : config.outputs) {
    paths.push_back(again.config->stem + output.path.substr(config.stem.size()));
  }
  return paths;
}

}  // namespace

void set_session_process_group(const std::string& backend, int rank, int world_size) {
  std::lock_guard<std::mutex> lock(g_lifecycle_mu);
  if (g_session == nullptr) return;
  std::lock_guard<std::mutex> drain_lock(g_session->drain_mu);
  TraceInfo& info = g_session->info;
  info.backend = backend;
  const Config& config = g_session->config;
  if (!config.rank_given && world_size > 0 && rank >= 0 && rank < world_size &&
      (rank != info.rank || world_size != info.world_size)) {
    info.rank = rank;
    info.world_size = world_size;
    std::vector<std::string> paths = paths_for_group(config, rank, world_size);
    std::vector<std::string> errors =
        config.trace_file ? g_session->drain->move_outputs(paths) : std::vector<std::string>{};
    for (const std::string& error : errors) log_line(error + "; the trace keeps its name.");
    if (errors.empty() && paths.size() == g_session->output_paths.size() && !paths.empty()) {
      g_session->stem = paths[0].substr(
          0, paths[0].size() - (g_session->output_paths[0].size() - g_session->stem.size()));
      g_session->output_paths = paths;
      if (config.armed || config.capture_slow > 0) demand::moved(paths[0], rank, world_size);
    }
  }
  g_session->drain->process_group_known(info);
  if (!g_session->callback_installed) {
    g_session->callback_inputs = true;  // outside the step window: installed with inputs later
  } else if (!g_session->callback_inputs) {
    // A process group without WORLD_SIZE in the environment (e.g. mp.spawn): from now on the
    // collectives need their inputs. Ranges already open keep the callback they started with.
    observer::uninstall(g_session->callback);
    g_session->callback = observer::install(true, g_id_requests > 0);
    g_session->callback_inputs = true;
  }
}

void set_record_function_ids(bool on) {
  std::lock_guard<std::mutex> lock(g_lifecycle_mu);
  bool before = g_id_requests > 0;
  g_id_requests = std::max(0, g_id_requests + (on ? 1 : -1));
  if (g_session == nullptr) return;
  if (on && !before) {  // a new recording: the last one's attribution is no longer asked for
    std::lock_guard<std::mutex> drain_lock(g_session->drain_mu);
    g_session->drain_all();
    g_session->drain->rf_attribution().clear();
    if (g_session->capture.drain) g_session->capture.drain->rf_attribution().clear();
  }
  if (!g_session->callback_installed || before == (g_id_requests > 0)) return;
  // Ranges already open keep the callback they started with (RecordFunction copies them).
  observer::uninstall(g_session->callback);
  g_session->callback = observer::install(g_session->callback_inputs, g_id_requests > 0);
}

void update_session_recording() {
  std::lock_guard<std::mutex> lock(g_lifecycle_mu);
  if (g_session == nullptr) return;
  bool capture_memory = false;
  bool on =
      steps::recording_wanted(&capture_memory);  // asked under our lock: changes apply in order
  if (g_session->callback_installed != on) {
    if (on) {
      g_session->callback = observer::install(g_session->callback_inputs, g_id_requests > 0);
    } else {
      observer::uninstall(g_session->callback);
    }
    g_session->callback_installed = on;
    session_state::g_recording.store(on, std::memory_order_relaxed);
  }
  // While nothing records, the allocator's reports are not recorded either.
  memory::set_enabled(on && (g_session->config.memory || capture_memory));
}

bool request_capture(uint64_t steps, std::string* why) {
  if (steps == 0) {
    *why = "steps must be at least 1";
    return false;
  }
  captures::Capture c;
  c.reason = "program";
  c.steps = steps;
  return steps::order_capture(c, steps::kNextStep, why);
}

std::vector<RangeAttribution> record_function_attribution() {
  if (g_forked_child) return {};
  std::lock_guard<std::mutex> lock(g_lifecycle_mu);
  if (g_session == nullptr) return {};
  std::lock_guard<std::mutex> drain_lock(g_session->drain_mu);
  g_session->drain_all();  // every range ended so far
  g_session->flush_all();
  const InternTable& names = InternTable::instance();
  std::vector<RangeAttribution> out;
  // A capture's ranges reach its own drainer only when the trace file does not record them.
  for (Drainer* d : {g_session->drain.get(), g_session->capture.drain.get()}) {
    if (d == nullptr) continue;
    for (const RfEntry& e : d->rf_attribution().entries()) {
      out.push_back({e.rf_id, &names.str(e.fqn_id),
                     e.type_id != 0 ? &names.str(e.type_id) : nullptr, phase_name(e.phase)});
    }
  }
  return out;
}

void register_summary_writer() { g_summary_writer.store(true, std::memory_order_release); }

std::vector<SummaryDue> take_summaries_due() {
  if (g_forked_child) return {};  // the parent's, copied by fork: never written twice
  std::lock_guard<std::mutex> lock(g_summaries_mu);
  return std::exchange(g_summaries_due, {});
}

bool add_device_events(bool main, uint32_t capture, const std::vector<DeviceEvent>& events,
                       const DeviceCounts& counts) {
  if (g_forked_child) return false;
  std::lock_guard<std::mutex> lock(g_lifecycle_mu);
  if (g_session == nullptr) return false;
  Session& s = *g_session;
  std::lock_guard<std::mutex> drain_lock(s.drain_mu);
  s.drain_all();  // a capture's file opens with its first segment: make sure it is open
  bool taken = false;
  std::vector<Drainer*> to;
  if (main && s.config.trace_file && !s.drain->failed()) to.push_back(s.drain.get());
  if (capture != 0 && capture == s.capture.index && s.capture.drain) {
    to.push_back(s.capture.drain.get());
  }
  if (capture != 0) g_device_capture.compare_exchange_strong(capture, 0);
  for (Drainer* d : to) {
    for (const DeviceEvent& e : events) d->device_event(e, s.info.base_time_ns);
    d->device_recording(counts);
    taken = true;
  }
  s.finish_capture_if_complete(false);
  return taken;
}

void expect_device_events(uint32_t capture) {
  g_device_capture.store(capture, std::memory_order_release);
}

void flush_session() {
  if (g_forked_child) return;
  std::lock_guard<std::mutex> lock(g_lifecycle_mu);
  if (g_session == nullptr) return;
  std::lock_guard<std::mutex> drain_lock(g_session->drain_mu);
  g_session->drain_all();
  g_session->flush_all();
}

}  // namespace fqntrace

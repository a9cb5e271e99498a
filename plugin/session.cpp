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
#include <vector>

#include "buffer/buffer_registry.h"
#include "buffer/intern.h"
#include "buffer/ticks.h"
#include "drain/drainer.h"
#include "exporters/exporter.h"
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
// events at +10 and 74 % at +19 (bench/drain_nice.py, docs/benchmarks.md). Best effort: a
// failure leaves the priority as it was.
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
struct sigaction g_default_term {};

void flush_then_terminate(int signal_number) {
  uint32_t wanted = g_flush_requests.fetch_add(1, std::memory_order_acq_rel) + 1;
  const timespec poll{0, 2 * 1000 * 1000};
  for (int waited = 0; waited < kTermFlushWaitMs / 2 && g_drain_alive.load(std::memory_order_acquire) &&
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

struct Session {
  Config config;
  TraceInfo info;
  std::unique_ptr<Drainer> drain;     // owns the exporters; guarded by drain_mu
  observer::Callbacks callback;
  bool callback_installed = false;
  bool callback_inputs = false;  // the callback asks the dispatcher for op inputs
  uint64_t dropped_before = 0;   // the process-wide drop count when this session started
  bool summaries_removed = false;

  std::thread drain_thread;

  std::mutex drain_mu;                // one thread at a time touches the drain
  std::chrono::steady_clock::time_point last_flush = std::chrono::steady_clock::now();

  // Caller holds drain_mu.
  void drain_all() {
    drain->begin_batch();  // before any event of this batch: see TickConverter
    uint64_t gen = session_state::generation();
    session_state::buffers().for_each_and_reap([&](ThreadBuffer& b) { drain->drain(b, gen); });
  }

  // Caller holds drain_mu.
  void flush_all() {
    last_flush = std::chrono::steady_clock::now();
    std::string error;
    if (!drain->flush(&error)) on_write_failure(error);
  }

  void on_write_failure(const std::string& error) {
    drain->fail();
    session_state::g_running.store(false, std::memory_order_relaxed);
    log_bad_env(config.raw_value, error + remove_summaries(),
                "Free disk space or set FQNTRACE to a path on another file system.");
  }

  // A summary is written whole at the end: once recording failed it would describe part of the
  // run, so the (still empty, or partly written) file goes rather than stay as 0 bytes. Returns
  // the words that tell the user, for the one failure line.
  std::string remove_summaries() {
    if (summaries_removed) return "";
    summaries_removed = true;
    std::string removed;
    for (const Output& output : config.outputs) {
      if (output.kind != Output::Kind::kSummary) continue;
      ::unlink(output.path.c_str());
      removed += (removed.empty() ? "" : ", ") + output.path;
    }
    return removed.empty() ? "" : "; " + removed + " not written";
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
  session_state::g_running.store(false, std::memory_order_relaxed);
  memory::set_enabled(false);  // the allocator stops asking our reporter (and its own table)
  g_session = nullptr;
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
    std::unique_ptr<Exporter> ex = output.kind == Output::Kind::kChrome ? make_chrome_trace_exporter()
                                   : output.kind == Output::Kind::kJsonLines ? make_json_lines_exporter()
                                                                             : make_summary_exporter();
    TraceInfo output_info = info;
    output_info.path = output.path;
    if (!ex->open(output_info, error)) return false;
    exporters.push_back(std::move(ex));
  }
  session->drain = std::make_unique<Drainer>(std::move(exporters), info.mono_origin_ns, config.shapes,
                                             config.module_spans, config.sample < 1.0);

  // Events left in a thread's ring by an earlier session are not this session's.
  session_state::buffers().for_each_and_reap([](ThreadBuffer& b) { b.ring.drain([](const RawEvent&) {}); });

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
  session_state::g_running.store(true, std::memory_order_relaxed);
  session_state::g_shapes.store(config.shapes, std::memory_order_relaxed);
  session_state::g_module_ranges.store(config.module_ranges, std::memory_order_relaxed);
  session_state::g_cpu_time.store(config.cpu_time, std::memory_order_relaxed);
  session_state::g_sample.store(config.sample, std::memory_order_relaxed);
  session_state::g_module_spans.store(config.module_spans, std::memory_order_relaxed);
  // Op inputs cost every op (the dispatcher boxes its arguments), so only when something needs
  // them: FLOPs, shapes, or a distributed job (collectives' bytes and group size).
  session->callback_inputs = config.flops || config.shapes || config.world_size > 1;
  if (steps::begin_session(config.steps)) {  // else the callback waits for the step window
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
  return true;
}

bool stop_session() {
  // A forked child may have inherited the mutex locked: it owns no session, never wait for it.
  if (g_forked_child) return true;
  std::lock_guard<std::mutex> lock(g_lifecycle_mu);
  if (g_session == nullptr) return true;
  std::unique_ptr<Session> session(g_session);
  g_session = nullptr;
  session_state::g_running.store(false, std::memory_order_relaxed);
  session_state::g_recording.store(false, std::memory_order_relaxed);
  memory::set_enabled(false);
  if (session->callback_installed) observer::uninstall(session->callback);
  session_state::stop_drain();
  if (session->drain_thread.joinable()) session->drain_thread.join();
  g_drain_alive.store(false, std::memory_order_release);

  std::lock_guard<std::mutex> drain_lock(session->drain_mu);
  session->drain_all();
  session->flush_all();
  if (session->drain->failed()) return false;
  uint64_t dropped = session_state::buffers().dropped_total() - session->dropped_before;
  std::vector<std::string> errors = session->drain->finish(dropped);
  for (const std::string& error : errors) session->on_write_failure(error);
  bool ok = errors.empty();
  if (dropped > 0) {
    log_line("dropped " + std::to_string(dropped) +
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
    if (std::strcmp(name, kParentVariable) == 0) return config.inherited ? parent_text.c_str() : nullptr;
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
    std::vector<std::string> errors = g_session->drain->move_outputs(paths_for_group(config, rank, world_size));
    for (const std::string& error : errors) log_line(error + "; the trace keeps its name.");
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
  }
  if (!g_session->callback_installed || before == (g_id_requests > 0)) return;
  // Ranges already open keep the callback they started with (RecordFunction copies them).
  observer::uninstall(g_session->callback);
  g_session->callback = observer::install(g_session->callback_inputs, g_id_requests > 0);
}

void set_session_recording(bool on) {
  std::lock_guard<std::mutex> lock(g_lifecycle_mu);
  if (g_session == nullptr || g_session->callback_installed == on) return;
  if (on) {
    g_session->callback = observer::install(g_session->callback_inputs, g_id_requests > 0);
  } else {
    observer::uninstall(g_session->callback);
  }
  g_session->callback_installed = on;
  session_state::g_recording.store(on, std::memory_order_relaxed);
  // Outside the step window the allocator's reports are not recorded either.
  memory::set_enabled(on && g_session->config.memory);
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
  out.reserve(g_session->drain->rf_attribution().entries().size());
  for (const RfEntry& e : g_session->drain->rf_attribution().entries()) {
    out.push_back({e.rf_id, &names.str(e.fqn_id), e.type_id != 0 ? &names.str(e.type_id) : nullptr,
                   phase_name(e.phase)});
  }
  return out;
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

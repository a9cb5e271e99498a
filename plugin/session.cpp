#include "plugin/session.h"

#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "buffer/buffer_registry.h"
#include "buffer/ticks.h"
#include "drain/drainer.h"
#include "exporters/exporter.h"
#include "plugin/log.h"
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

std::string read_process_name() {
  std::ifstream comm("/proc/self/comm");
  std::string name;
  std::getline(comm, name);
  return name.empty() ? "process" : name;
}

struct Session {
  Config config;
  TraceInfo info;
  std::unique_ptr<Drainer> drain;     // owns the exporters; guarded by drain_mu
  at::CallbackHandle callback = 0;
  bool callback_installed = false;
  bool callback_inputs = false;  // the callback asks the dispatcher for op inputs

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
    log_bad_env(config.raw_value, error,
                "Free disk space or set FQNTRACE to a path on another file system.");
  }

  void drain_loop() {
    for (;;) {
      if (session_state::wait_for_drain(kDrainPeriod)) return;  // stop_session() drains last
      std::lock_guard<std::mutex> lock(drain_mu);
      drain_all();
      if (std::chrono::steady_clock::now() - last_flush >= kFlushPeriod) flush_all();
    }
  }
};

std::mutex g_lifecycle_mu;
Session* g_session = nullptr;
bool g_forked_child = false;
std::once_flag g_process_hooks_once;

void stop_at_exit() { stop_session(); }

void on_fork_child() {
  // The child has no drain thread and must never write the parent's file.
  g_forked_child = true;
  session_state::g_running.store(false, std::memory_order_relaxed);
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
  session->drain = std::make_unique<Drainer>(std::move(exporters), info.mono_origin_ns, config.shapes);

  // Events left in a thread's ring by an earlier session are not this session's.
  session_state::buffers().for_each_and_reap([](ThreadBuffer& b) { b.ring.drain([](const RawEvent&) {}); });

  std::call_once(g_process_hooks_once, [] {
    std::atexit(stop_at_exit);
    pthread_atfork(nullptr, nullptr, on_fork_child);
  });

  choose_tick_source(config.monotonic_clock);
  session->drain->start_clock();  // before the callback: the first event already has a map
  session_state::g_generation.fetch_add(1, std::memory_order_relaxed);
  session_state::g_running.store(true, std::memory_order_relaxed);
  session_state::g_shapes.store(config.shapes, std::memory_order_relaxed);
  // Op inputs cost every op (the dispatcher boxes its arguments), so only when something needs
  // them: FLOPs, shapes, or a distributed job (collectives' bytes and group size).
  session->callback_inputs = config.flops || config.shapes || config.world_size > 1;
  if (steps::begin_session(config.steps)) {  // else the callback waits for the step window
    session->callback = observer::install(session->callback_inputs);
    session->callback_installed = true;
  }
  Session* raw = session.release();
  session_state::allow_drain();
  raw->drain_thread = std::thread([raw] {
    pthread_setname_np(pthread_self(), "fqntrace-drain");
    raw->drain_loop();
  });
  g_session = raw;
  return true;
}

bool stop_session() {
  std::lock_guard<std::mutex> lock(g_lifecycle_mu);
  if (g_forked_child || g_session == nullptr) return true;
  std::unique_ptr<Session> session(g_session);
  g_session = nullptr;
  session_state::g_running.store(false, std::memory_order_relaxed);
  if (session->callback_installed) observer::uninstall(session->callback);
  session_state::stop_drain();
  if (session->drain_thread.joinable()) session->drain_thread.join();

  std::lock_guard<std::mutex> drain_lock(session->drain_mu);
  session->drain_all();
  session->flush_all();
  if (session->drain->failed()) return false;
  uint64_t dropped = session_state::buffers().dropped_total();
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

void set_session_backend(const std::string& backend) {
  std::lock_guard<std::mutex> lock(g_lifecycle_mu);
  if (g_session == nullptr) return;
  std::lock_guard<std::mutex> drain_lock(g_session->drain_mu);
  g_session->info.backend = backend;
  g_session->drain->backend_known(backend);
  if (!g_session->callback_installed) {
    g_session->callback_inputs = true;  // outside the step window: installed with inputs later
  } else if (!g_session->callback_inputs) {
    // A process group without WORLD_SIZE in the environment (e.g. mp.spawn): from now on the
    // collectives need their inputs. Ranges already open keep the callback they started with.
    observer::uninstall(g_session->callback);
    g_session->callback = observer::install(true);
    g_session->callback_inputs = true;
  }
}

void set_session_recording(bool on) {
  std::lock_guard<std::mutex> lock(g_lifecycle_mu);
  if (g_session == nullptr || g_session->callback_installed == on) return;
  if (on) {
    g_session->callback = observer::install(g_session->callback_inputs);
  } else {
    observer::uninstall(g_session->callback);
  }
  g_session->callback_installed = on;
}

void flush_session() {
  std::lock_guard<std::mutex> lock(g_lifecycle_mu);
  if (g_session == nullptr) return;
  std::lock_guard<std::mutex> drain_lock(g_session->drain_mu);
  g_session->drain_all();
  g_session->flush_all();
}

}  // namespace fqntrace

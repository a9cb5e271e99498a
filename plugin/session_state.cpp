#include "plugin/session_state.h"

#include <condition_variable>
#include <mutex>
#include <string>

#include "plugin/log.h"

namespace fqntrace::session_state {

std::atomic<uint64_t> g_running_generation{0};
std::atomic<uint64_t> g_generation{0};
std::atomic<bool> g_shapes{false};
std::atomic<bool> g_recording{false};
std::atomic<bool> g_module_ranges{false};
std::atomic<bool> g_cpu_time{false};
std::atomic<double> g_sample{1.0};
std::atomic<bool> g_module_spans{true};

namespace {

constexpr uint32_t kRingCapacityLog2 = 16;  // 65536 events × 64 B = 4 MB per traced thread

// The drain thread's wake-up. Process-wide and never destroyed: a producer may signal it while
// a session is being stopped.
struct DrainWake {
  std::mutex mu;  // guards stop
  std::condition_variable cv;
  bool stop = false;
  std::atomic<bool> wanted{false};  // a ring is half full
};
DrainWake& drain_wake() {
  static DrainWake* w = new DrainWake();
  return *w;
}

}  // namespace

BufferRegistry& buffers() {
  static BufferRegistry* r = new BufferRegistry(kRingCapacityLog2);  // outlives every thread
  return *r;
}

ThreadBuffer* register_buffer(uint32_t os_tid, const char* thread_name) {
  return buffers().add(os_tid, thread_name);
}

void retire_buffer(ThreadBuffer* buffer) { buffers().retire(buffer); }

void wake_drain() noexcept {
  drain_wake().wanted.store(true, std::memory_order_relaxed);
  drain_wake().cv.notify_one();
}

bool wait_for_drain(std::chrono::milliseconds period) {
  DrainWake& w = drain_wake();
  std::unique_lock<std::mutex> lock(w.mu);
  w.cv.wait_for(lock, period, [&] { return w.stop || w.wanted.load(std::memory_order_relaxed); });
  w.wanted.store(false, std::memory_order_relaxed);
  return w.stop;
}

void stop_drain() {
  {
    std::lock_guard<std::mutex> lock(drain_wake().mu);
    drain_wake().stop = true;
  }
  drain_wake().cv.notify_all();
}

void allow_drain() {
  std::lock_guard<std::mutex> lock(drain_wake().mu);
  drain_wake().stop = false;
}

void fail_from_callback(const char* what) noexcept {
  static std::atomic<bool> logged{false};
  set_running(false);
  if (!logged.exchange(true)) {
    try {
      log_line(std::string(what) +
               "; tracing is off for the rest of this process. "
               "Events recorded so far are kept. Please report this with the trace.");
    } catch (...) {
    }
  }
}

}  // namespace fqntrace::session_state

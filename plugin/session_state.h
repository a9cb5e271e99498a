// The state the observer and the session share (plugin/session_state.cpp), kept apart from
// session.h so the observer sees only relaxed atomics and a few slow-path entry points.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>

#include "buffer/buffer_registry.h"

namespace fqntrace::session_state {

// The running session's generation; 0 while none runs (stopped, failed, a forked child). One
// word, so that a callback asks "is this thread attached to a running session?" by one compare
// with its own ThreadState::ready_generation.
extern std::atomic<uint64_t> g_running_generation;
extern std::atomic<uint64_t> g_generation;
extern std::atomic<bool> g_shapes;  // FQNTRACE_SHAPES=1
// The observer's callback is installed (a session runs and the step window is open): module
// scopes, which open frames without a RecordFunction, record only then.
extern std::atomic<bool> g_recording;
extern std::atomic<bool> g_module_ranges;  // FQNTRACE_MODULE_RANGES=1
extern std::atomic<bool> g_cpu_time;       // FQNTRACE_CPU=1 (plugin/thread_cpu.h)
// FQNTRACE_SAMPLE=p < 1: ops are sampled by torch; module scopes fill the sequence-number map
// (plugin/seq_map.h) so every backward node still finds its module. 1: the full trace.
extern std::atomic<double> g_sample;
extern std::atomic<bool>
    g_module_spans;  // on unless FQNTRACE_MODULE_SPANS=0 (drain/module_spans.h)

inline uint64_t running_generation() {
  return g_running_generation.load(std::memory_order_relaxed);
}
inline bool running() { return running_generation() != 0; }
// The session of generation() starts running, or tracing stops.
inline void set_running(bool on) {
  g_running_generation.store(on ? g_generation.load(std::memory_order_relaxed) : 0,
                             std::memory_order_relaxed);
}
inline uint64_t generation() { return g_generation.load(std::memory_order_relaxed); }
inline bool shapes() { return g_shapes.load(std::memory_order_relaxed); }
inline bool module_ranges() { return g_module_ranges.load(std::memory_order_relaxed); }
inline bool cpu_time() { return g_cpu_time.load(std::memory_order_relaxed); }
inline double sample() { return g_sample.load(std::memory_order_relaxed); }
inline bool sampled() { return sample() < 1.0; }
inline bool module_spans() { return g_module_spans.load(std::memory_order_relaxed); }
inline bool recording() { return g_recording.load(std::memory_order_relaxed) && running(); }

// Slow path: a thread's first event in a process. nullptr if tracing stopped meanwhile.
ThreadBuffer* register_buffer(uint32_t os_tid, const char* thread_name);
void retire_buffer(ThreadBuffer* buffer);

// A ring is half full: drain now rather than at the next period (a futex wake, at most once
// per half ring of events).
void wake_drain() noexcept;

// An exception reached a callback: log one line, turn tracing off, keep what was recorded.
void fail_from_callback(const char* what) noexcept;

// Session side (plugin/session.cpp), never called from a callback.
// Every thread's buffer, across sessions (a buffer outlives the session that created it).
BufferRegistry& buffers();
// The drain thread's sleep: returns after `period`, on wake_drain(), or on stop_drain(); true
// when the drain thread should end.
bool wait_for_drain(std::chrono::milliseconds period);
void stop_drain();   // ends the drain thread's waiting for good ...
void allow_drain();  // ... until the next session's drain thread starts

}  // namespace fqntrace::session_state

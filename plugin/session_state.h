// What the hot path needs to know about the session, kept apart from session.h so the observer
// sees only relaxed atomics and a few slow-path entry points.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

#include "buffer/buffer_registry.h"

namespace fqntrace::session_state {

extern std::atomic<bool> g_running;
extern std::atomic<uint64_t> g_generation;
extern std::atomic<bool> g_shapes;  // FQNTRACE_SHAPES=1

inline bool running() { return g_running.load(std::memory_order_relaxed); }
inline uint64_t generation() { return g_generation.load(std::memory_order_relaxed); }
inline bool shapes() { return g_shapes.load(std::memory_order_relaxed); }

// Slow path: a thread's first event in a process. nullptr if tracing stopped meanwhile.
ThreadBuffer* register_buffer(uint32_t os_tid, const char* thread_name);
void retire_buffer(ThreadBuffer* buffer);

// A ring is half full: drain now rather than at the next period (a futex wake, at most once
// per half ring of events).
void wake_drain() noexcept;

// An exception reached a callback: log one line, turn tracing off, keep what was recorded.
void fail_from_callback(const char* what) noexcept;

}  // namespace fqntrace::session_state

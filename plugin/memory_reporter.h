// FQNTRACE_MEMORY: how the allocator's reports reach the observer. c10's allocators report every
// allocation and free to the object in the thread-local debug-info slot PROFILER_STATE, which is
// torch.profiler's: torch reads whatever sits there as its own profiler state and refuses to start
// while one is present. So fqntrace holds the slot only while a traced range is open on the
// thread (the outermost range's start puts our reporter there, its end gives the slot back), and
// never while anything else holds it (torch.profiler running: memory is off on that thread, said
// once). docs/memory.md has the rules and what they miss.
#pragma once
#include <atomic>
#include <memory>

namespace c10 {
class ThreadLocalDebugInfo;
}

namespace fqntrace::memory {

extern std::atomic<bool> g_enabled;  // a session with FQNTRACE_MEMORY=1 is recording
inline bool enabled() { return g_enabled.load(std::memory_order_relaxed); }

// Session side: turns the reporter on or off. Off, a reporter still in some thread's slot stays
// there inert (the allocator asks it and is told not to report), never freed under a thread.
void set_enabled(bool on);

// Per thread (a member of the observer's thread state): the slot lists before and after our push,
// so re-entering costs no allocation (the same list node is put back while nothing else changed).
struct ThreadSlot {
  std::shared_ptr<c10::ThreadLocalDebugInfo> before;
  std::shared_ptr<c10::ThreadLocalDebugInfo> ours;
  bool held = false;
};

// The thread's outermost traced range opens: take the slot if it is empty.
void enter(ThreadSlot& slot) noexcept;
// ... and closes: give it back (only if the list is still the one we made).
void leave(ThreadSlot& slot) noexcept;

}  // namespace fqntrace::memory

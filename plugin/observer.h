// The RecordFunction observer: one global callback for FUNCTION, BACKWARD_FUNCTION and
// USER_SCOPE. Each thread keeps a stack of open ranges; every range gets the fqn and phase it
// belongs to, and on close becomes one RawEvent in the thread's ring. No lock, no allocation,
// no formatting, no I/O on this path once the thread is attached.
#pragma once
#include <ATen/record_function.h>

#include <cstdint>

namespace fqntrace {
class CompiledGraph;
}

namespace fqntrace::observer {

// The global callbacks of a session: one for every scope, or, when ops are sampled
// (session_state::sampled()), one sampled for ops (FUNCTION) and `rest`, unsampled, for backward
// nodes and user scopes (0 when there is none).
struct Callbacks {
  at::CallbackHandle ops = 0;
  at::CallbackHandle rest = 0;
};
// Installs the global callbacks; the session calls this once per session start. With
// need_inputs, the dispatcher hands op inputs to the callback (for FLOPs; costs a little per op).
Callbacks install(bool need_inputs, bool need_ids = false);
void uninstall(Callbacks callbacks);

// Side channels, set on the current thread just before the range they describe opens.
// The next USER_SCOPE range opened on this thread is the module `fqn_id` of class `type_id`.
void set_pending_module(uint32_t fqn_id, uint32_t type_id);
// The next USER_SCOPE range is not a module's forward but work done for module `fqn_id` (FSDP's
// all-gather for the block it prefetches): what runs inside takes that fqn and keeps its phase.
void set_pending_serve(uint32_t fqn_id);
void clear_pending_module();  // clears both

// Module scopes without a RecordFunction (torch.profiler and other observers never see them):
// open_scope pushes a frame on this thread's stack as a range's start would, close_scope closes
// the innermost one. A module frame (kModule) becomes an `nn.Module: <fqn>` event named
// `name_id`; a serve frame (kServe) lends its fqn to what runs inside and is not written. false:
// nothing was opened (not recording, too deep, or the same module as the enclosing one), so
// close_scope must not be called. Never throw.
enum class ScopeKind : uint8_t { kModule, kServe };
bool open_scope(ScopeKind kind, uint32_t fqn_id, uint32_t type_id, uint32_t name_id) noexcept;
void close_scope() noexcept;

// Training steps (plugin/steps.cpp): the step `name_id` that began at `start_ticks` ends with the
// innermost range open on this thread (the optimizer's `Optimizer.step#…` range its hooks run in):
// when that range ends, the observer calls steps::write_range(). false when no range is open.
bool defer_step_range(uint32_t name_id, uint64_t start_ticks);

// Compiled code (docs/compile.md). `Torch-Compiled Region` ranges ask the resolver which module
// is being called (the Python binding reads it from the interpreter's frames); 0: unknown.
using RegionRootResolver = uint32_t (*)();
void set_compiled_region_resolver(RegionRootResolver resolver);
// A compiled graph starts/ends running on this thread: until the matching exit, the ops it calls
// directly are named by its table, under the fqn of the range open at enter. Calls nest.
void enter_compiled_graph(CompiledGraph* graph);
void exit_compiled_graph();

// FQNTRACE_MEMORY (plugin/memory_reporter.cpp): an allocation (bytes > 0) or free the allocator
// reported on this thread becomes a kMemory event attributed to the innermost open range, and
// counts towards that range's allocated bytes. No lock, no allocation; never throws.
void record_memory(uint64_t ptr, int64_t bytes, uint64_t total_allocated, uint64_t total_reserved,
                   int8_t device_type, int8_t device_index) noexcept;
// torch.profiler is about to start on this thread: give the reporting slot back now if we hold
// it (torch refuses to start while anything sits there); ranges still open then record no memory.
void yield_memory_slot() noexcept;

}  // namespace fqntrace::observer

// Internal: module scopes by interned ids, for callers that open and close them in two calls
// (the Python forward pre/post hooks through binding/, FSDP's serve scopes) and for the
// parameter hooks of trace_module(). C++ programs use include/fqntrace/module_scope.h instead.
#pragma once
#include <cstdint>
#include <string_view>

namespace fqntrace {

uint32_t intern(std::string_view s);                    // the id the functions below take
void module_enter(uint32_t fqn_id, uint32_t type_id);  // opens a scope kept on a per-thread stack
void module_enter_unnamed();  // opens nothing, so that the matching module_exit() stays balanced
void module_exit();                                     // closes the innermost one
void announce_accumulate_owner(uint32_t fqn_id);        // called by a parameter's gradient hook
// A scope (not written to the trace) whose contents are attributed to module `fqn_id` with the
// phase they run in: work done for a module outside its own forward (FSDP's all-gathers and
// reduce-scatters, issued from other modules' hooks or the engine's final callback).
void serve_enter(uint32_t fqn_id);
void serve_exit();

}  // namespace fqntrace

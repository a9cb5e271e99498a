// Internal: module scopes by interned ids, for callers that open and close them in two calls
// (fqntrace's nn.Module.__call__ through binding/, FSDP's serve scopes) and for trace_module().
// C++ programs use include/fqntrace/module_scope.h instead.
//
// A scope is a frame on the observer's stack (observer::open_scope): no RecordFunction, so
// torch.profiler and other observers see nothing of it. With FQNTRACE_MODULE_RANGES=1 a module
// scope is instead a USER_SCOPE RecordFunction `nn.Module: <fqn>` (torch.profiler shows it).
#pragma once
#include <cstdint>
#include <string_view>

namespace fqntrace {

uint32_t intern(std::string_view s);  // the id the functions below take
// The interned id of "nn.Module: <fqn>" for the interned `fqn_id` (the name of its events).
uint32_t module_name_id(uint32_t fqn_id);

// How a scope was opened: what closing it takes.
enum class ScopeOpened : uint8_t { kNothing, kFrame, kRange };
ScopeOpened open_module(uint32_t fqn_id, uint32_t type_id, uint32_t name_id);
void close_module(ScopeOpened how);
// A scope (not written to the trace) whose contents are attributed to module `fqn_id` with the
// phase they run in: work done for a module outside its own forward (FSDP's all-gathers and
// reduce-scatters, issued from other modules' hooks or the engine's final callback).
void serve_enter(uint32_t fqn_id);
void serve_exit();

// The module owning a trainable parameter, for its gradient accumulation (plugin/param_owners.h):
// `key` is the parameter's Python object, or its TensorImpl when it has none; `kind` the Python
// object's type (an entry answers only for an object of its kind: a dead parameter's address may
// be taken by another tensor), 0 for none. The reader gives a live object's kind in backward.
void set_param_owner(const void* key, uint32_t fqn_id, uintptr_t kind = 0);
uint32_t param_owner(const void* key, uintptr_t kind = 0);  // 0: none recorded
void set_param_kind_reader(uintptr_t (*reader)(const void* object));

// An entry of the module table (buffer/module_table.h): module `fqn_id` of class `type_id`, below
// `parent_id` (0 for a root). Every module named is declared, so one that never runs through a
// scope but owns work (its parameters' gradients) is still known to readers.
void declare_module(uint32_t fqn_id, uint32_t type_id, uint32_t parent_id);

}  // namespace fqntrace

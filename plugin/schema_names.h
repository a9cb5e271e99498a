// Which op names may be cached by their pointer. RecordFunction names a dispatcher op by its
// schema (the name points into the registered operator's FunctionSchema, which stays put while
// the operator is registered); every other range (autograd nodes, user scopes, the engine's
// wrappers) owns a std::string copy of its name, whose address the next range may reuse for a
// different name. RecordFunction::overload_name() tells the two apart without copying: the
// string form returns one fixed "" literal, the schema form a pointer into the schema.
// Deregistering any operator (a torch.library Library destroyed) frees its schema, whose
// memory a new operator may then reuse: it bumps epoch(), and pointer caches older than that
// forget what they hold.
#pragma once
#include <ATen/record_function.h>

#include <atomic>
#include <cstdint>

namespace fqntrace::schema_names {

extern const char* g_string_form_overload;  // what overload_name() returns for a string name
extern std::atomic<uint64_t> g_epoch;

// Once per process, before the first callback: learns the string form's literal and starts
// listening to operator deregistrations. Not thread-safe against callbacks; idempotent.
void init();

// fn's name points into a registered operator's schema (false until init() ran).
inline bool is_schema_name(const at::RecordFunction& fn) {
  const char* literal = g_string_form_overload;
  return literal != nullptr && fn.overload_name() != literal;
}

inline uint64_t epoch() { return g_epoch.load(std::memory_order_acquire); }

// Whether the callback asks for op inputs (and so counts FLOPs): pointer caches note per op
// whether it needs more than the common start, so a change starts a new epoch.
extern std::atomic<bool> g_flops_counted;
inline bool flops_counted() { return g_flops_counted.load(std::memory_order_relaxed); }
void set_flops_counted(bool counted);

}  // namespace fqntrace::schema_names

// A RecordFunction's name, read inline. RecordFunction::name() is an out-of-line call in
// libtorch, and its result's length took a strlen on every range that is not a dispatcher op.
// The name lives in the RecordFunction's private `fn_`: the std::string it copied, or the
// dispatcher op's schema, whose name is an inline accessor. For the torch versions whose layout
// we compile against (the headers of the torch we are built for), it is read from there.
#pragma once
#include <ATen/core/function_schema.h>
#include <ATen/record_function.h>
#include <torch/version.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <variant>

#include "plugin/schema_names.h"

// RecordFunction's layout depends on NDEBUG (a debug-only member sits before `fn_`), as the
// inline seqNr() already does; torch's wheels are built with NDEBUG. Other torch versions, or a
// build without NDEBUG, call name() (as does -DFQNTRACE_RF_NAME_INLINE=0).
#ifndef FQNTRACE_RF_NAME_INLINE
#if defined(NDEBUG) && TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 13 && \
    TORCH_VERSION_MINOR <= 15
#define FQNTRACE_RF_NAME_INLINE 1
#else
#define FQNTRACE_RF_NAME_INLINE 0
#endif
#endif

namespace fqntrace::rf_name {

// The name, its length, and whether it points into a registered operator's schema (which stays
// put while the operator is registered) rather than into the RecordFunction's own copy.
struct Name {
  const char* data;
  size_t size;
  bool schema;
};

#if FQNTRACE_RF_NAME_INLINE
using Descriptor = std::variant<std::string, at::RecordFunction::schema_ref_t>;
using DescriptorMember = Descriptor at::RecordFunction::*;

// The pointer to the private member, handed out by an explicit instantiation (where access is not
// checked; the member's type is checked against the headers at compile time).
DescriptorMember descriptor_member();
template <DescriptorMember kMember>
struct DescriptorAccess {
  friend DescriptorMember descriptor_member() { return kMember; }
};
template struct DescriptorAccess<&at::RecordFunction::fn_>;

inline Name of(const at::RecordFunction& fn) {
  const Descriptor& d = fn.*descriptor_member();
  if (const auto* schema = std::get_if<at::RecordFunction::schema_ref_t>(&d)) {
    const std::string& name = schema->get().name();
    return {name.c_str(), name.size(), true};
  }
  const std::string* copied = std::get_if<std::string>(&d);
  if (copied == nullptr) return {"", 0, false};  // valueless: never in practice
  return {copied->c_str(), copied->size(), false};
}
#else
inline Name of(const at::RecordFunction& fn) {
  const char* name = fn.name();
  return {name, std::strlen(name), schema_names::is_schema_name(fn)};
}
#endif

}  // namespace fqntrace::rf_name

#include "fqntrace/module_scope.h"

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "buffer/intern.h"
#include "buffer/module_table.h"
#include "plugin/observer.h"
#include "plugin/param_owners.h"
#include "plugin/session_state.h"
#include "record_function/module_ranges.h"

namespace fqntrace {
namespace {

// FQNTRACE_MODULE_RANGES=1: a USER_SCOPE range named "nn.Module: <fqn>"; our observer learns which
// module it is through the pending-module side channel. Only when someone observes USER_SCOPE.
bool begin_module_range(at::RecordFunction& range, uint32_t fqn_id, uint32_t type_id) {
  observer::set_pending_module(fqn_id, type_id);
  range.before(InternTable::instance().str(module_name_id(fqn_id)));
  observer::clear_pending_module();  // if our observer did not take it, nobody else may
  return true;
}

// Ranges of that mode that span two calls (RecordFunction cannot move: they live on the heap).
thread_local std::vector<std::unique_ptr<at::RecordFunction>> tls_open_ranges;
thread_local std::vector<bool> tls_open_serves;  // serve_enter/serve_exit: whether a frame opened

}  // namespace

uint32_t intern(std::string_view s) { return InternTable::instance().intern(s); }

uint32_t module_name_id(uint32_t fqn_id) {
  thread_local std::unordered_map<uint32_t, uint32_t> names;  // grows once per module name
  auto it = names.find(fqn_id);
  if (it != names.end()) return it->second;
  uint32_t id = intern("nn.Module: " + std::string(InternTable::instance().str(fqn_id)));
  names.emplace(fqn_id, id);
  return id;
}

ScopeOpened open_module(uint32_t fqn_id, uint32_t type_id, uint32_t name_id) {
  if (!session_state::module_ranges()) {
    return observer::open_scope(observer::ScopeKind::kModule, fqn_id, type_id, name_id)
               ? ScopeOpened::kFrame
               : ScopeOpened::kNothing;
  }
  auto callbacks = at::getStepCallbacksUnlessEmpty(at::RecordScope::USER_SCOPE);
  if (!callbacks.has_value()) return ScopeOpened::kNothing;
  auto range = std::make_unique<at::RecordFunction>(std::move(*callbacks));
  begin_module_range(*range, fqn_id, type_id);
  tls_open_ranges.push_back(std::move(range));
  return ScopeOpened::kRange;
}

void close_module(ScopeOpened how) {
  if (how == ScopeOpened::kFrame) {
    observer::close_scope();
  } else if (how == ScopeOpened::kRange && !tls_open_ranges.empty()) {
    std::unique_ptr<at::RecordFunction> range = std::move(tls_open_ranges.back());
    tls_open_ranges.pop_back();
    range->end();
  }
}

ModuleScope::ModuleScope(std::string_view fqn, std::string_view module_type) {
  open(intern(fqn), intern(module_type));
}

ModuleScope::ModuleScope(const torch::nn::Module& module) {
  std::string fqn = module_fqn(module);
  std::string type = module_type_name(module);
  open(intern(fqn.empty() ? type : fqn), intern(type));
}

ModuleScope::~ModuleScope() {
  if (range_.has_value()) range_->end();
  if (frame_) observer::close_scope();
}

void ModuleScope::open(uint32_t fqn_id, uint32_t type_id) {
  if (!session_state::module_ranges()) {
    frame_ =
        observer::open_scope(observer::ScopeKind::kModule, fqn_id, type_id, module_name_id(fqn_id));
    return;
  }
  auto callbacks = at::getStepCallbacksUnlessEmpty(at::RecordScope::USER_SCOPE);
  if (!callbacks.has_value()) return;
  range_.emplace(std::move(*callbacks));
  begin_module_range(*range_, fqn_id, type_id);
}

void serve_enter(uint32_t fqn_id) {
  tls_open_serves.push_back(observer::open_scope(observer::ScopeKind::kServe, fqn_id, 0, 0));
}

void serve_exit() {
  if (tls_open_serves.empty()) return;
  bool opened = tls_open_serves.back();
  tls_open_serves.pop_back();
  if (opened) observer::close_scope();
}

void set_param_owner(const void* key, uint32_t fqn_id, uintptr_t kind) {
  param_owners::set(key, fqn_id, kind);
}
uint32_t param_owner(const void* key, uintptr_t kind) { return param_owners::find(key, kind); }
void declare_module(uint32_t fqn_id, uint32_t type_id, uint32_t parent_id) {
  ModuleTable::instance().declare(fqn_id, type_id, parent_id);
}
void set_param_kind_reader(uintptr_t (*reader)(const void* object)) {
  param_owners::set_kind_reader(reader);
}

}  // namespace fqntrace

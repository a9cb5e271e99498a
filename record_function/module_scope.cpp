#include "fqntrace/module_scope.h"

#include <memory>
#include <vector>

#include "buffer/intern.h"
#include "plugin/observer.h"
#include "record_function/module_ranges.h"

namespace fqntrace {
namespace {

// Starts a USER_SCOPE range named "nn.Module: <fqn>" and tells our observer (through the
// pending-module side channel) which module it is. Callers construct the range only when someone
// observes USER_SCOPE (our observer or torch.profiler), so otherwise a scope costs one check.
void begin_module_range(at::RecordFunction& range, uint32_t fqn_id, uint32_t type_id) {
  observer::set_pending_module(fqn_id, type_id);
  range.before("nn.Module: " + InternTable::instance().str(fqn_id));
  observer::clear_pending_module();  // if our observer did not take it, nobody else may
}

// Python's forward pre/post hooks are two calls: their ranges live on this per-thread stack.
thread_local std::vector<std::unique_ptr<at::RecordFunction>> tls_open_modules;
// fqn id of each entry above (an unnamed entry repeats the one below it).
thread_local std::vector<uint32_t> tls_open_module_ids;
thread_local std::vector<std::unique_ptr<at::RecordFunction>> tls_open_serves;  // serve_enter/exit

}  // namespace

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
}

void ModuleScope::open(uint32_t fqn_id, uint32_t type_id) {
  auto callbacks = at::getStepCallbacksUnlessEmpty(at::RecordScope::USER_SCOPE);
  if (!callbacks.has_value()) return;
  range_.emplace(std::move(*callbacks));
  begin_module_range(*range_, fqn_id, type_id);
}

uint32_t intern(std::string_view s) { return InternTable::instance().intern(s); }

void module_enter(uint32_t fqn_id, uint32_t type_id) {
  auto callbacks = at::getStepCallbacksUnlessEmpty(at::RecordScope::USER_SCOPE);
  // torch.compile(m) runs the hooks for its wrapper and again for `m` itself, both named alike:
  // one scope is enough (its ops and time are the same).
  bool same_as_enclosing = !tls_open_module_ids.empty() && tls_open_module_ids.back() == fqn_id;
  if (!callbacks.has_value() || same_as_enclosing) {
    module_enter_unnamed();  // keep enter/exit balanced
    return;
  }
  // RecordFunction cannot move, so a range spanning two calls lives on the heap.
  auto range = std::make_unique<at::RecordFunction>(std::move(*callbacks));
  begin_module_range(*range, fqn_id, type_id);
  tls_open_modules.push_back(std::move(range));
  tls_open_module_ids.push_back(fqn_id);
}

void module_enter_unnamed() {
  tls_open_modules.push_back(nullptr);
  tls_open_module_ids.push_back(tls_open_module_ids.empty() ? 0 : tls_open_module_ids.back());
}

void module_exit() {
  if (tls_open_modules.empty()) return;
  std::unique_ptr<at::RecordFunction> range = std::move(tls_open_modules.back());
  tls_open_modules.pop_back();
  tls_open_module_ids.pop_back();
  if (range) range->end();
}

void announce_accumulate_owner(uint32_t fqn_id) { observer::set_accumulate_owner(fqn_id); }

void serve_enter(uint32_t fqn_id) {
  auto callbacks = at::getStepCallbacksUnlessEmpty(at::RecordScope::USER_SCOPE);
  if (!callbacks.has_value()) {
    tls_open_serves.push_back(nullptr);
    return;
  }
  auto range = std::make_unique<at::RecordFunction>(std::move(*callbacks));
  observer::set_pending_serve(fqn_id);
  range->before("fqntrace::serve");
  observer::clear_pending_module();
  tls_open_serves.push_back(std::move(range));
}

void serve_exit() {
  if (tls_open_serves.empty()) return;
  std::unique_ptr<at::RecordFunction> range = std::move(tls_open_serves.back());
  tls_open_serves.pop_back();
  if (range) range->end();
}

}  // namespace fqntrace

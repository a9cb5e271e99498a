// Naming a C++ module tree once (ModTracker's scheme) and recording its parameters' owners so
// gradient accumulation is attributed to the owning module.
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>

#include "fqntrace/module_scope.h"
#include "record_function/module_ranges.h"

namespace fqntrace {
namespace {

struct ModuleNames {
  std::shared_mutex mu;
  std::unordered_map<const torch::nn::Module*, std::string> fqns;
  std::unordered_set<const c10::TensorImpl*> owned_params;
};

ModuleNames& names() {
  static ModuleNames* n = new ModuleNames();  // read by hooks that may run during exit
  return *n;
}

}  // namespace

std::string module_type_name(const torch::nn::Module& module) {
  std::string name = module.name();
  size_t colon = name.rfind("::");
  if (colon != std::string::npos) name = name.substr(colon + 2);
  if (name.size() > 4 && name.compare(name.size() - 4, 4, "Impl") == 0)
    name.resize(name.size() - 4);
  return name;
}

std::string module_fqn(const torch::nn::Module& module) {
  ModuleNames& n = names();
  std::shared_lock<std::shared_mutex> lock(n.mu);
  auto it = n.fqns.find(&module);
  return it == n.fqns.end() ? std::string() : it->second;
}

void trace_module(const torch::nn::Module& root, const std::string& root_name) {
  const std::string root_fqn = root_name.empty() ? module_type_name(root) : root_name;
  ModuleNames& n = names();
  std::unique_lock<std::shared_mutex> lock(n.mu);
  // named_modules() walks in registration order with the root first, so the first owner of a
  // shared parameter is the first module in named_modules() order.
  for (const auto& item : root.named_modules(/*name_prefix=*/"", /*include_self=*/true)) {
    const std::string fqn = item.key().empty() ? root_fqn : root_fqn + "." + item.key();
    n.fqns[item.value().get()] = fqn;
    uint32_t fqn_id = intern(fqn);
    size_t dot = item.key().rfind('.');
    std::string parent = item.key().empty()         ? std::string()
                         : dot == std::string::npos ? root_fqn
                                                    : root_fqn + "." + item.key().substr(0, dot);
    declare_module(fqn_id, intern(module_type_name(*item.value())), intern(parent));
    for (const auto& param : item.value()->named_parameters(/*recurse=*/false)) {
      const at::Tensor& p = param.value();
      if (!p.requires_grad() || !n.owned_params.insert(p.unsafeGetTensorImpl()).second) continue;
      set_param_owner(p.unsafeGetTensorImpl(), fqn_id);
    }
  }
}

}  // namespace fqntrace

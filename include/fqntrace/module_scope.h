// fqntrace — module-boundary record scopes for C++ (libtorch) programs.
//
// Quick start:
//   fqntrace::trace_module(*model, "Model");        // names every submodule once
//   ...
//   torch::Tensor Block::forward(torch::Tensor x) {
//     fqntrace::ModuleScope scope(*this);            // ops below carry "Model.blocks.0"
//     return fc->forward(x);
//   }
// Run with FQNTRACE=trace.json. A scope is seen by fqntrace only (torch.profiler's output stays as
// without it); with FQNTRACE_MODULE_RANGES=1 it is a USER_SCOPE RecordFunction named
// "nn.Module: <fqn>", which torch.profiler shows too.
//
// This folder (include/fqntrace/) is fqntrace's whole C++ API: link libfqntrace and add
// include/ to the include path. Everything else in the source tree is internal.
#pragma once
#include <ATen/record_function.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fqntrace {

class ModuleScope {
 public:
  ModuleScope(std::string_view fqn, std::string_view module_type);
  // A module registered with trace_module(); an unregistered one is named by its class.
  explicit ModuleScope(const torch::nn::Module& module);
  ~ModuleScope();
  ModuleScope(const ModuleScope&) = delete;
  ModuleScope& operator=(const ModuleScope&) = delete;

 private:
  void open(uint32_t fqn_id, uint32_t type_id);
  std::optional<at::RecordFunction> range_;  // FQNTRACE_MODULE_RANGES=1
  bool frame_ = false;                       // otherwise: a frame fqntrace's observer keeps
};

// Names `root` (as `root_name`, or its class name when empty) and every submodule the way
// ModTracker does (children joined by attribute name), and records the owner of each trainable
// parameter so its gradient accumulation is attributed to that module (first owner wins). Nothing
// is attached to the parameters.
void trace_module(const torch::nn::Module& root, const std::string& root_name = "");

// The fqn registered for `module`, or "" if it was never registered.
std::string module_fqn(const torch::nn::Module& module);

// Class name of a C++ module without namespace and "Impl" suffix ("torch::nn::LinearImpl" →
// "Linear").
std::string module_type_name(const torch::nn::Module& module);

}  // namespace fqntrace

// A nested C++ model for the tests: a Sequential, a ModuleList of blocks, a module used twice,
// each forward wrapped in fqntrace::ModuleScope.
#pragma once
#include <torch/torch.h>

#include "fqntrace/module_scope.h"

namespace fqntrace::testing {

// Calls module->forward(args...) inside a ModuleScope for that module.
template <typename M, typename... Args>
torch::Tensor scoped(M& module, Args&&... args) {
  fqntrace::ModuleScope scope(*module);
  return module->forward(std::forward<Args>(args)...);
}

struct BlockImpl : torch::nn::Module {
  BlockImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(8, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 8));
  }
  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor h = torch::relu(scoped(fc1, x));
    return x + scoped(fc2, h);
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Block);

struct NetImpl : torch::nn::Module {
  NetImpl() {
    stem =
        register_module("stem", torch::nn::Sequential(torch::nn::Linear(4, 8), torch::nn::Tanh()));
    blocks = register_module("blocks", torch::nn::ModuleList(Block(), Block()));
    act = register_module("act", torch::nn::ReLU());
    head = register_module("head", torch::nn::Linear(8, 2));
  }
  torch::Tensor forward(torch::Tensor x) {
    {
      fqntrace::ModuleScope scope(*stem);
      for (const auto& child : stem->children()) {
        fqntrace::ModuleScope inner(*child);
        x = child->as<torch::nn::LinearImpl>() ? child->as<torch::nn::LinearImpl>()->forward(x)
                                               : child->as<torch::nn::TanhImpl>()->forward(x);
      }
    }
    for (const auto& block : *blocks) {
      fqntrace::ModuleScope scope(*block);
      x = block->as<BlockImpl>()->forward(x);
      x = scoped(act, x);  // the same module, called once per block
    }
    return scoped(head, x);
  }
  torch::nn::Sequential stem{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::ReLU act{nullptr};
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(Net);

// Forward + backward of `net` under its own root ModuleScope.
inline void train_step(Net& net, int batch = 3) {
  torch::Tensor y;
  {
    fqntrace::ModuleScope scope(*net);
    y = net->forward(torch::randn({batch, 4}));
  }
  y.pow(2).sum().backward();
}

}  // namespace fqntrace::testing

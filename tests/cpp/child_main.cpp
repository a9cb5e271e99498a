// A traced C++ program for the tests: runs a small model forward + backward, then exits with
// the code given as argv[1] (default 3), or throws if argv[1] is "throw".
#include <torch/torch.h>

#include <cstdlib>
#include <string>

#include "fqntrace/module_scope.h"

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "3";
  torch::nn::Linear fc(8, 4);
  fqntrace::trace_module(*fc, "Child");
  for (int step = 0; step < 3; ++step) {
    torch::Tensor y;
    {
      fqntrace::ModuleScope scope(*fc);
      y = fc->forward(torch::randn({2, 8}));
    }
    y.sum().backward();
  }
  if (mode == "throw") throw std::runtime_error("child failed on purpose");
  return std::atoi(mode.c_str());
}

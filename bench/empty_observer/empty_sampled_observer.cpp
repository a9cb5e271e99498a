// The limit under fqntrace's sampled mode (docs/sampling.md): the callbacks it installs, doing
// nothing. Ops (FUNCTION) get a callback sampled at FQNTRACE_BENCH_SAMPLE (default 0.01) through
// torch's own sampling; with FQNTRACE_BENCH_EMPTY_NODES unset or 1, a second, unsampled callback
// observes autograd nodes and user scopes (BACKWARD_FUNCTION, USER_SCOPE), as the sampled mode
// does. With FQNTRACE_BENCH_EMPTY_NODES=0 only the sampled ops callback is installed: what any
// observer that samples ops through RecordFunction costs before it does anything.
#include <ATen/record_function.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace {

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction&) { return nullptr; }

void on_end(const at::RecordFunction&, at::ObserverContext*) {}

double sample_from_env() {
  const char* value = std::getenv("FQNTRACE_BENCH_SAMPLE");
  if (value == nullptr || *value == '\0') return 0.01;
  double p = std::strtod(value, nullptr);
  return p > 0.0 && p <= 1.0 ? p : 0.01;
}

std::vector<at::CallbackHandle> g_handles;

void install() {
  g_handles.push_back(at::addGlobalCallback(at::RecordFunctionCallback(&on_start, &on_end)
                                                .scopes({at::RecordScope::FUNCTION})
                                                .samplingProb(sample_from_env())));
  const char* nodes = std::getenv("FQNTRACE_BENCH_EMPTY_NODES");
  if (nodes == nullptr || std::string(nodes) != "0") {
    g_handles.push_back(at::addGlobalCallback(
        at::RecordFunctionCallback(&on_start, &on_end)
            .scopes({at::RecordScope::BACKWARD_FUNCTION, at::RecordScope::USER_SCOPE})));
  }
}

struct InstallEmptySampledObserver {
  InstallEmptySampledObserver() { install(); }
};

InstallEmptySampledObserver install_at_load;

}  // namespace

// For an in-process A/B (docs/history/experiments/sample_cost.py --floor): take the callbacks
// out and put them back, a block of steps at a time.
extern "C" __attribute__((visibility("default"))) void fqntrace_bench_empty_sampled_remove() {
  for (at::CallbackHandle handle : g_handles) at::removeCallback(handle);
  g_handles.clear();
}

extern "C" __attribute__((visibility("default"))) void fqntrace_bench_empty_sampled_install() {
  if (g_handles.empty()) install();
}

// The reference "physical limit" for a RecordFunction observer: one global callback on the same
// scopes fqntrace observes (FUNCTION, BACKWARD_FUNCTION, USER_SCOPE) whose start and end callbacks
// do nothing. Loading the library (torch.ops.load_library) installs it from a static initializer,
// so whatever it costs per op is what the dispatcher charges any observer before it does work.
#include <ATen/record_function.h>

#include <memory>

namespace {

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction&) { return nullptr; }

void on_end(const at::RecordFunction&, at::ObserverContext*) {}

struct InstallEmptyObserver {
  InstallEmptyObserver() {
    handle = at::addGlobalCallback(
        at::RecordFunctionCallback(&on_start, &on_end)
            .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                     at::RecordScope::USER_SCOPE}));
  }
  at::CallbackHandle handle = 0;
};

InstallEmptyObserver install_at_load;

}  // namespace

// Lets a driver confirm (through ctypes) that this library's callback is the one installed.
extern "C" __attribute__((visibility("default"))) unsigned long long fqntrace_bench_empty_handle() {
  return static_cast<unsigned long long>(install_at_load.handle);
}

#include "plugin/schema_names.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <memory>
#include <mutex>

namespace fqntrace::schema_names {

const char* g_string_form_overload = nullptr;
std::atomic<uint64_t> g_epoch{1};
std::atomic<bool> g_flops_counted{true};

namespace {

class DeregistrationListener : public c10::OpRegistrationListener {
 public:
  void onOperatorRegistered(const c10::OperatorHandle&) override {}
  void onOperatorDeregistered(const c10::OperatorHandle&) override {
    g_epoch.fetch_add(1, std::memory_order_acq_rel);
  }
};

}  // namespace

void init() {
  static std::once_flag once;
  std::call_once(once, [] {
    // The listener lives as long as the process: its handle is never destroyed.
    new c10::RegistrationHandleRAII(c10::Dispatcher::singleton().addRegistrationListener(
        std::make_unique<DeregistrationListener>()));
    // A RecordFunction that was never started holds the string form (an empty name). Asked
    // before our callback is installed, so constructing it starts nothing.
    at::RecordFunction probe(at::RecordScope::USER_SCOPE);
    g_string_form_overload = probe.overload_name();
  });
}

void set_flops_counted(bool counted) {
  if (g_flops_counted.exchange(counted, std::memory_order_acq_rel) != counted) {
    g_epoch.fetch_add(1, std::memory_order_acq_rel);
  }
}

}  // namespace fqntrace::schema_names

#include "plugin/memory_reporter.h"

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/csrc/profiler/orchestration/observer.h>

#include "plugin/log.h"
#include "plugin/observer.h"

namespace fqntrace::memory {

std::atomic<bool> g_enabled{false};

namespace {

namespace prof = torch::profiler::impl;

// A ProfilerStateBase, not a bare MemoryReportingInfoBase: torch static_casts whatever is in the
// slot to ProfilerStateBase and reads its config, so ours must have one (state Disabled: torch's
// profilerEnabled() stays false).
class Reporter final : public prof::ProfilerStateBase {
 public:
  Reporter() : ProfilerStateBase(prof::ProfilerConfig(prof::ProfilerState::Disabled)) {}

  void reportMemoryUsage(void* ptr, int64_t bytes, size_t total_allocated, size_t total_reserved,
                         c10::Device device) override {
    observer::record_memory(reinterpret_cast<uint64_t>(ptr), bytes, total_allocated, total_reserved,
                            static_cast<int8_t>(device.type()),
                            static_cast<int8_t>(device.index()));
  }

  bool memoryProfilingEnabled() const override { return enabled(); }

  prof::ActiveProfilerType profilerType() override { return prof::ActiveProfilerType::NONE; }
};

// One reporter for the process, never freed: threads' slot lists may keep pointing at it.
const std::shared_ptr<c10::DebugInfoBase>& reporter() {
  static auto* r = new std::shared_ptr<c10::DebugInfoBase>(std::make_shared<Reporter>());
  return *r;
}

std::atomic<bool> g_told_busy{false};

}  // namespace

void set_enabled(bool on) {
  if (on) (void)reporter();  // made on the session's thread, not in a callback
  g_enabled.store(on, std::memory_order_relaxed);
}

void enter(ThreadSlot& slot) noexcept {
  try {
    c10::DebugInfoBase* holder = c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE);
    if (holder == reporter().get()) return;  // ours, carried here by at::ThreadLocalState
    if (holder != nullptr) {
      if (!g_told_busy.exchange(true, std::memory_order_relaxed)) {
        log_line(
            "torch.profiler holds the allocator's reporting slot on a thread: "
            "FQNTRACE_MEMORY records nothing there while it runs (docs/memory.md).");
      }
      return;
    }
    std::shared_ptr<c10::ThreadLocalDebugInfo> current = c10::ThreadLocalDebugInfo::current();
    if (slot.ours != nullptr && current == slot.before) {
      c10::ThreadLocalDebugInfo::_forceCurrentDebugInfo(slot.ours);
    } else {
      c10::ThreadLocalDebugInfo::_push(c10::DebugInfoKind::PROFILER_STATE, reporter());
      slot.before = std::move(current);
      slot.ours = c10::ThreadLocalDebugInfo::current();
    }
    slot.held = true;
  } catch (...) {
    slot.held = false;
  }
}

void leave(ThreadSlot& slot) noexcept {
  if (!slot.held) return;
  slot.held = false;
  try {
    // Someone changed the list meanwhile (a profiler pushed on top, a guard restored another
    // list): theirs to undo; putting ours back would break it.
    if (c10::ThreadLocalDebugInfo::current() == slot.ours) {
      c10::ThreadLocalDebugInfo::_forceCurrentDebugInfo(slot.before);
    }
  } catch (...) {
  }
}

}  // namespace fqntrace::memory

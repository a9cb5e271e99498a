#include "plugin/param_owners.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>

#include <atomic>
#include <mutex>
#include <typeinfo>

namespace fqntrace::param_owners {
namespace {

// Open addressing, linear probing; a key is never removed (a dead parameter's slot is reused only
// if another object takes its address, and then set() overwrites it when that one is named).
constexpr uint32_t kSlotsLog2 = 16;
constexpr uint32_t kSlots = 1u << kSlotsLog2;
constexpr uint32_t kMaxProbe = 64;

struct Slot {
  std::atomic<uintptr_t> key{0};
  std::atomic<uintptr_t> kind{0};
  std::atomic<uint32_t> fqn{0};
};

std::atomic<KindReader> kind_reader{nullptr};

Slot* slots() {
  static Slot* table = new Slot[kSlots];  // read by backward threads that may outlive exit
  return table;
}

uint32_t home(uintptr_t key) {
  return static_cast<uint32_t>(((key >> 4) * 0x9E3779B97F4A7C15ull) >> (64 - kSlotsLog2));
}

std::mutex& writer_mutex() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}

}  // namespace

void set(const void* key, uint32_t fqn_id, uintptr_t kind) {
  uintptr_t k = reinterpret_cast<uintptr_t>(key);
  if (k == 0 || fqn_id == 0) return;
  std::lock_guard<std::mutex> lock(writer_mutex());
  Slot* table = slots();
  for (uint32_t probe = 0, i = home(k); probe < kMaxProbe; ++probe, i = (i + 1) & (kSlots - 1)) {
    uintptr_t held = table[i].key.load(std::memory_order_relaxed);
    if (held == k || held == 0) {
      table[i].fqn.store(fqn_id, std::memory_order_relaxed);
      table[i].kind.store(kind, std::memory_order_relaxed);
      table[i].key.store(k, std::memory_order_release);
      return;
    }
  }
}

uint32_t find(const void* key, uintptr_t kind) {
  uintptr_t k = reinterpret_cast<uintptr_t>(key);
  if (k == 0) return 0;
  const Slot* table = slots();
  for (uint32_t probe = 0, i = home(k); probe < kMaxProbe; ++probe, i = (i + 1) & (kSlots - 1)) {
    uintptr_t held = table[i].key.load(std::memory_order_acquire);
    if (held == k) {
      uintptr_t set_for = table[i].kind.load(std::memory_order_relaxed);
      return set_for != 0 && kind != 0 && set_for != kind
                 ? 0
                 : table[i].fqn.load(std::memory_order_relaxed);
    }
    if (held == 0) return 0;
  }
  return 0;
}

uint32_t of_current_node() noexcept {
  c10::intrusive_ptr<torch::autograd::Node> node = torch::autograd::get_current_node();
  // The exact type, not dynamic_cast's walk of the hierarchy (a third of this function's cost):
  // torch derives nothing from AccumulateGrad.
  if (!node || typeid(*node) != typeid(torch::autograd::AccumulateGrad)) return 0;
  auto* accumulate = static_cast<torch::autograd::AccumulateGrad*>(node.get());
  if (!accumulate->variable.defined()) return 0;
  c10::TensorImpl* impl = accumulate->variable.unsafeGetTensorImpl();
  // The Python object lives as long as its TensorImpl (torch keeps it while C++ holds the tensor).
  const void* object = impl->pyobj_slot()->load_pyobj();
  KindReader read_kind = kind_reader.load(std::memory_order_acquire);
  uint32_t owner =
      object != nullptr ? find(object, read_kind != nullptr ? read_kind(object) : 0) : 0;
  return owner != 0 ? owner : find(impl);
}

void set_kind_reader(KindReader reader) { kind_reader.store(reader, std::memory_order_release); }

}  // namespace fqntrace::param_owners

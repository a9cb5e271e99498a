#include "plugin/collectives.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <atomic>
#include <cstring>
#include <string>

namespace fqntrace::collectives {
namespace {

const char* const kKindNames[] = {"",        "allreduce", "allgather", "reduce_scatter", "broadcast",
                                  "alltoall", "barrier",   "gather",    "scatter",        "reduce",
                                  "send",     "recv",      "other"};
constexpr uint8_t kNumKinds = sizeof(kKindNames) / sizeof(kKindNames[0]);
constexpr uint32_t kSlots = 4096;

struct Slot {
  std::atomic<uint64_t> ticket{0};  // ticket + 1 once written
  std::atomic<uint64_t> attribution{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint32_t> group_size{0};
};

struct Fifo {
  std::atomic<uint64_t> issued{0};
  std::atomic<uint64_t> taken{0};
  Slot slots[kSlots];
};

Fifo* fifos() {
  static Fifo* f = new Fifo[kNumKinds];  // never destroyed: gloo threads may outlive us at exit
  return f;
}

// "c10d::_allgather_base_" → "allgatherbase" → "allgather".
uint8_t classify(std::string squashed) {
  for (const char* suffix : {"coalesced", "intotensor", "tensor", "base"}) {
    size_t n = std::strlen(suffix);
    if (squashed.size() > n && squashed.compare(squashed.size() - n, n, suffix) == 0) {
      squashed.resize(squashed.size() - n);
    }
  }
  for (const char* suffix : {"intotensor", "tensor"}) {  // e.g. allgather_into_tensor_coalesced
    size_t n = std::strlen(suffix);
    if (squashed.size() > n && squashed.compare(squashed.size() - n, n, suffix) == 0) {
      squashed.resize(squashed.size() - n);
    }
  }
  const std::pair<const char*, uint8_t> table[] = {
      {"allreduce", 1}, {"allgather", 2}, {"reducescatter", 3}, {"broadcast", 4},
      {"alltoall", 5},  {"barrier", 6},   {"gather", 7},        {"scatter", 8},
      {"reduce", 9},    {"send", 10},     {"recv", 11},         {"recvanysource", 11}};
  for (const auto& [name, kind] : table) {
    if (squashed == name) return kind;
  }
  return 12;
}

}  // namespace

uint8_t kind_of(const char* op_name, bool* is_work) {
  std::string name(op_name);
  const char* rest;
  if (name.rfind("c10d::", 0) == 0) {
    *is_work = false;
    rest = op_name + 6;
  } else if (name.rfind("gloo:", 0) == 0) {
    *is_work = true;
    rest = op_name + 5;
  } else {
    return 0;
  }
  std::string squashed;
  for (const char* p = rest; *p != '\0'; ++p) {
    if (*p != '_') squashed.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(*p))));
  }
  // c10d ops that are not collectives (e.g. c10d::monitored_barrier_ is, but allocation helpers
  // are not) still classify as "other": every c10d op is communication-related.
  return classify(squashed);
}

const char* kind_name(uint8_t kind) { return kind < kNumKinds ? kKindNames[kind] : "other"; }

void describe(c10::ArrayRef<const c10::IValue> inputs, uint64_t* bytes, uint32_t* group_size) {
  *bytes = 0;
  *group_size = 0;
  if (inputs.empty()) return;
  const c10::IValue& first = inputs[0];
  if (first.isTensor()) {
    *bytes = first.toTensor().defined() ? first.toTensor().nbytes() : 0;
  } else if (first.isTensorList()) {
    for (const at::Tensor& t : first.toTensorList().vec()) *bytes += t.defined() ? t.nbytes() : 0;
  } else if (first.isList()) {
    // Tensor[] or Tensor[][] (c10d::allgather_ takes its output lists first).
    for (const c10::IValue& v : first.toListRef()) {
      if (v.isTensor() && v.toTensor().defined()) {
        *bytes += v.toTensor().nbytes();
      } else if (v.isTensorList()) {
        for (const at::Tensor& t : v.toTensorList().vec()) *bytes += t.defined() ? t.nbytes() : 0;
      } else if (v.isList()) {
        for (const c10::IValue& w : v.toListRef()) {
          if (w.isTensor() && w.toTensor().defined()) *bytes += w.toTensor().nbytes();
        }
      }
    }
  }
  for (const c10::IValue& v : inputs) {
    if (!v.isCustomClass()) continue;
    try {
      auto group = v.toCustomClass<c10d::ProcessGroup>();
      *group_size = static_cast<uint32_t>(group->getSize());
      return;
    } catch (...) {
      // another custom class: keep looking
    }
  }
}

void issue(uint8_t kind, const Issued& issued) {
  if (kind == 0 || kind >= kNumKinds) return;
  Fifo& f = fifos()[kind];
  uint64_t ticket = f.issued.fetch_add(1, std::memory_order_relaxed);
  Slot& s = f.slots[ticket % kSlots];
  s.attribution.store((static_cast<uint64_t>(issued.fqn_id) << 8) | static_cast<uint8_t>(issued.phase),
                      std::memory_order_relaxed);
  s.bytes.store(issued.bytes, std::memory_order_relaxed);
  s.group_size.store(issued.group_size, std::memory_order_relaxed);
  s.ticket.store(ticket + 1, std::memory_order_release);
}

bool take(uint8_t kind, Issued* out) {
  if (kind == 0 || kind >= kNumKinds) return false;
  Fifo& f = fifos()[kind];
  uint64_t ticket = f.taken.fetch_add(1, std::memory_order_relaxed);
  Slot& s = f.slots[ticket % kSlots];
  if (s.ticket.load(std::memory_order_acquire) != ticket + 1) return false;
  uint64_t a = s.attribution.load(std::memory_order_relaxed);
  out->fqn_id = static_cast<uint32_t>(a >> 8);
  out->phase = static_cast<Phase>(a & 0xFF);
  out->bytes = s.bytes.load(std::memory_order_relaxed);
  out->group_size = s.group_size.load(std::memory_order_relaxed);
  return true;
}

void reset() {
  for (uint8_t k = 0; k < kNumKinds; ++k) {
    Fifo& f = fifos()[k];
    f.issued.store(0, std::memory_order_relaxed);
    f.taken.store(0, std::memory_order_relaxed);
    for (Slot& s : f.slots) s.ticket.store(0, std::memory_order_relaxed);
  }
}

}  // namespace fqntrace::collectives

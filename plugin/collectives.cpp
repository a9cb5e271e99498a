#include "plugin/collectives.h"

#include <c10/util/ThreadLocalDebugInfo.h>

#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <vector>

namespace fqntrace::collectives {
namespace {

const char* const kKindNames[] = {
    "",       "allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall", "barrier",
    "gather", "scatter",   "reduce",    "send",           "recv",      "other"};
constexpr uint8_t kNumKinds = sizeof(kKindNames) / sizeof(kKindNames[0]);
// Our own slot in c10's thread-local debug info (identified by this string's address).
constexpr std::string_view kTagSlotName = "fqntrace.collective_issuer";
const c10::DebugInfoKind kTagSlot(&kTagSlotName);

struct IssuerTag : c10::DebugInfoBase {
  IssuerTag(const Issued& i, uint64_t s) : issued(i), session(s) {}
  Issued issued;
  uint64_t session;  // a tag left behind by an earlier session is ignored
};

// The debug info each open issuing op found when it started, innermost last.
thread_local std::vector<std::shared_ptr<c10::ThreadLocalDebugInfo>> tls_saved;

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
    if (*p != '_')
      squashed.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(*p))));
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

uint32_t begin_issue(const Issued& issued, uint64_t session) {
  tls_saved.push_back(c10::ThreadLocalDebugInfo::current());
  c10::ThreadLocalDebugInfo::_push(kTagSlot, std::make_shared<IssuerTag>(issued, session));
  return static_cast<uint32_t>(tls_saved.size());
}

void end_issue(uint32_t mark) {
  if (mark == 0 || mark > tls_saved.size()) return;
  // Restoring what the op found (rather than popping) also drops the tags of inner issuing ops
  // whose end never came.
  c10::ThreadLocalDebugInfo::_forceCurrentDebugInfo(tls_saved[mark - 1]);
  tls_saved.resize(mark - 1);
}

bool issuer_of_work(uint64_t session, Issued* out) {
  auto* tag = dynamic_cast<IssuerTag*>(c10::ThreadLocalDebugInfo::get(kTagSlot));
  if (tag == nullptr || tag->session != session) return false;
  *out = tag->issued;
  return true;
}

}  // namespace fqntrace::collectives

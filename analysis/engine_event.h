// The summary engine's view of one trace event (what parsing gives the rest of the engine), and
// the interner its strings go through. Internal to the engine (analysis/engine_*.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/bytes.h"

namespace fqntrace::analysis::engine {

constexpr int64_t kNestToleranceNs = 1;  // traceio.NEST_TOLERANCE_NS
constexpr std::string_view kEngineWrapper = "autograd::engine::evaluate_function:";
constexpr std::string_view kStepPrefix = "ProfilerStep#";              // step_times.STEP_PREFIX
constexpr std::string_view kCompiledRegion = "Torch-Compiled Region";  // traceio's compiled code
constexpr uint32_t kNone = 0xffffffffu;
// Phase keys: 0..2 the PHASES, 3 None (missing or null), 4.. any other value (interned).
constexpr uint32_t kPhaseNone = 3;

enum Cat : uint8_t { kCatOther, kCatCpuOp, kCatUserAnnotation, kCatDevice, kCatModuleSpan };

// a == b, by same_bytes (common/bytes.h).
inline bool same_text(std::string_view a, std::string_view b) {
  return a.size() == b.size() && same_bytes(a.data(), b.data(), a.size());
}

// Strings to dense ids; ids index a vector of the strings. A trace repeats a few hundred names
// and fqns millions of times: a cache of two ways per set, keyed by the length and the first and
// last eight bytes, answers most lookups with one compare of the text, without hashing all of
// it (one way thrashed: a quarter of a trace's strings share a slot with another). Strings
// alike in those bytes only share a set, which costs the map's lookup, never a wrong id.
class Interner {
 public:
  uint32_t id(std::string_view s) {
    Slot* set = &cache_[set_of(s) * 2];
    if (set[0].matches(s)) return set[0].id;
    if (set[1].matches(s)) {
      std::swap(set[0], set[1]);  // the most recent first
      return set[0].id;
    }
    uint32_t id = lookup(s);
    set[1] = set[0];
    set[0] = Slot{strings_[id]->data(), s.size(), id};
    return id;
  }
  const std::string& str(uint32_t id) const { return *strings_[id]; }
  size_t size() const { return strings_.size(); }

 private:
  struct Slot {
    const char* text = nullptr;  // the interned string's bytes (stable)
    size_t size = 0;
    uint32_t id = 0;
    bool matches(std::string_view s) const {
      return text != nullptr && size == s.size() && same_bytes(text, s.data(), size);
    }
  };
  static constexpr int kSetBits = 10;
  static constexpr size_t kSlots = size_t{2} << kSetBits;

  static size_t set_of(std::string_view s) {
    uint64_t first = 0, last = 0;
    if (s.size() >= 8) {
      first = load_word(s.data());
      last = load_word(s.data() + s.size() - 8);
    } else if (!s.empty()) {
      std::memcpy(&first, s.data(), s.size());
    }
    uint64_t h = (first * 0x9E3779B97F4A7C15ull) ^ (last * 0xC2B2AE3D27D4EB4Full) ^ s.size();
    return static_cast<size_t>((h ^ (h >> 29)) * 0xD6E8FEB86659FD93ull >> (64 - kSetBits));
  }

  uint32_t lookup(std::string_view s) {
    auto it = ids_.find(s);
    if (it != ids_.end()) return it->second;
    strings_.push_back(std::make_unique<std::string>(s));
    uint32_t id = static_cast<uint32_t>(strings_.size() - 1);
    ids_.emplace(std::string_view(*strings_.back()), id);
    return id;
  }

  std::unordered_map<std::string_view, uint32_t> ids_;
  std::vector<std::unique_ptr<std::string>> strings_;  // stable addresses for the views
  Slot cache_[kSlots];
};

// A JSON number as Python sees it: an int or a float (bool is not a number here).
struct Number {
  bool ok = false;
  bool is_int = false;
  bool exact_ns = false;  // a time read as its ns only (ns_value; d is not set)
  int64_t i = 0;
  double d = 0;
  int64_t ns_value = 0;
  // round(x * 1000): Python's round() of a float is round-half-even, as nearbyint.
  int64_t ns() const {
    if (is_int) return i * 1000;
    return exact_ns ? ns_value : static_cast<int64_t>(std::nearbyint(d * 1000.0));
  }
  bool negative() const { return is_int ? i < 0 : exact_ns ? ns_value < 0 : d < 0; }
};

// What the summary reads from one event.
struct Event {
  char ph = 0;  // 'X', 'i' or 0 (anything else)
  uint8_t cat = kCatOther;
  bool name_is_str = false, name_is_memory = false, name_is_wrapper = false;
  uint32_t name = 0;  // interned; "?" when not a string (summary_totals.event_name)
  Number ts, dur;
  uint32_t thread = 0;   // (str(pid), str(tid))
  uint32_t pid_str = 0;  // str(pid)
  uint32_t pid_key = 0;  // pid as a dict key (step ranges)
  bool args = false;     // args is an object
  uint32_t fqn = kNone;  // args.fqn when a string
  uint32_t phase = kPhaseNone;
  bool has_depth = false;
  int64_t depth = 0;
  bool has_module_type = false;
  uint32_t module_type = kNone;  // when a string
  Number cpu;                    // args.self_cpu_ns (plugin/thread_cpu.h)
  // A sampled trace's (Mode::kSampled): args.stack_depth of an op, args.node_ns of a backward
  // module span; exact ints
  bool has_stack_depth = false, has_node_ns = false;
  int64_t stack_depth = 0, node_ns = 0;
  bool async_work = false;  // truthy
  bool has_collective = false, has_fwd_thread = false;
  bool bytes_int = false, flops_int = false, size_int = false;
  int64_t bytes = 0, flops = 0, size = 0;
  uint32_t addr_key = 0;
  // What validate's checks read besides (State::checks only; see check_event)
  bool ph_str = false;                                  // ph is a string
  bool name_is_step = false, name_is_compiled = false;  // ProfilerStep#, compiled code
  bool has_pid = false, has_tid = false;                // present and not null
  bool odd_thread = false;                              // a pid or tid neither an int nor a string
  uint8_t cat_kind = 0;                                 // 0 missing or null, 1 a string, 2 other
  uint32_t cat_text = 0;                                // interned, when a string
  uint8_t id_kind = 0;  // 0 missing or null, 1 int, 2 string, 3 other
  int64_t id_int = 0;
  uint32_t id_text = 0;  // interned, when a string
};

}  // namespace fqntrace::analysis::engine

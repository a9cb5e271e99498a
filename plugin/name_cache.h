// What the observer knows about an op name, and the per-thread cache that finds it without a
// lock. A thread meets a name for the first time on the slow path (describe_name: intern it,
// classify it for FLOPs and collectives); every later lookup hashes the name, probes a small
// open-addressing table and confirms a hit by comparing the bytes with the interned string, so
// two names whose hashes collide each keep their own id. Names whose pointer is known to stay
// put (a registered operator's schema: plugin/schema_names.h) skip all that: a small table keyed
// by the pointer alone, emptied whenever an operator is deregistered (its epoch changes).
#pragma once
#include <cstdint>
#include <cstring>

#include "common/bytes.h"

namespace fqntrace {

// What the observer wants to know about a name, computed once when a thread first meets it.
struct NameInfo {
  uint32_t id;
  uint32_t collective_name_id;  // interned collective kind ("allreduce") when collective != 0
  uint8_t flop_kind;            // FlopKind
  uint8_t collective;           // collectives::kind_of, 0 for ordinary ops
  // One bit each, so that a cache slot stays half a cache line.
  uint8_t engine_eval : 1;      // "autograd::engine::evaluate_function: ..."
  uint8_t collective_work : 1;  // the backend's work range ("gloo:..."), not the issuing c10d op
  uint8_t compiled_region : 1;  // "Torch-Compiled Region: ...": Dynamo runs compiled code inside
  // flop_kind, collective or compiled_region: the op needs more than the common start (one
  // test on the hot path instead of three).
  uint8_t special : 1;
};

// Slow path (may lock): interns and classifies a name this thread has not met.
NameInfo describe_name(const char* name);

// Does an op of this name need more than the common start beyond being an engine wrapper (FLOPs
// to count, a collective, Dynamo's region)? FLOPs only while they are counted (the callback asks
// for inputs): NameInfo::special assumes they are, the pointer table's `plain` asks.
inline bool needs_special_start(const NameInfo& info, bool flops_counted) {
  return (info.flop_kind != 0 && flops_counted) || info.collective != 0 || info.compiled_region;
}

// Hash of the n bytes at s; never 0 (0 marks an empty cache slot). A name of 8 bytes or more
// is hashed by its length, its first word and its last two: names that share a long prefix
// ("autograd::engine::evaluate_function: ...") differ at their end, and a hit is confirmed by
// comparing every byte (same_bytes), so names that hash alike only cost a probe.
inline uint64_t hash_name(const char* s, size_t n) {
  auto mix = [](uint64_t h) {
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 32);
  };
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0x100000001B3ull);
  if (n >= 8) {
    h = mix(h ^ load_word(s));
    if (n > 16) h = mix(h ^ load_word(s + n - 16));
    h = mix(h ^ load_word(s + n - 8));
  } else {
    // 0..7 bytes without a variable-length memcpy (a library call): two overlapping 4-byte
    // loads, or three single bytes; either covers every byte.
    uint64_t w = 0;
    if (n >= 4) {
      uint32_t a, b;
      std::memcpy(&a, s, 4);
      std::memcpy(&b, s + n - 4, 4);
      w = a | (static_cast<uint64_t>(b) << 32);
    } else if (n > 0) {
      w = static_cast<uint8_t>(s[0]) |
          (static_cast<uint64_t>(static_cast<uint8_t>(s[n / 2])) << 8) |
          (static_cast<uint64_t>(static_cast<uint8_t>(s[n - 1])) << 16);
    }
    h = mix(h ^ w);
  }
  h = (h ^ (h >> 29)) * 0xc4ceb9fe1a85ec53ull;
  return (h ^ (h >> 32)) | 1;
}

// Per-thread cache in front of describe_name (lives inside the thread's state, no TLS of its own).
class NameCache {
 public:
  static constexpr uint32_t kSlots = 2048;
  static constexpr uint32_t kProbes = 8;

  __attribute__((always_inline)) const NameInfo& lookup(const char* name) {
    return lookup(name, std::strlen(name));
  }
  __attribute__((always_inline)) const NameInfo& lookup(const char* name, size_t n) {
    return lookup(name, n, hash_name(name, n));
  }

  // The name's info when its pointer is one lookup_stable() keyed in this epoch and the op needs
  // nothing beyond the common start (`plain`), else nullptr. A pointer lookup_stable() keyed
  // points into a schema that is still registered (deregistering one ends the epoch), so no
  // other live string can have that address.
  __attribute__((always_inline)) const NameInfo* known_plain(const char* name, uint64_t epoch) {
    const PointerSlot& p = pointer_slot(name);
    return p.name == name && epoch == pointer_epoch_ && p.plain ? &p.info : nullptr;
  }

  // For a name whose pointer is stable while `epoch` stays the same (schema_names::epoch()).
  // n: the name's length. flops_counted: the callback asks for op inputs, so an op with FLOPs
  // needs its special start (within one epoch: a change of it starts a new one).
  __attribute__((always_inline)) const NameInfo& lookup_stable(const char* name, size_t n,
                                                               uint64_t epoch, bool flops_counted) {
    if (__builtin_expect(epoch != pointer_epoch_, 0)) forget_pointers(epoch);
    PointerSlot& p = pointer_slot(name);
    if (__builtin_expect(p.name == name, 1)) return p.info;
    const NameInfo& info = lookup(name, n);
    if (info.id == 0) return info;  // not interned (table full): never keyed by its pointer
    p.info = info;
    p.name = name;
    p.plain = !(info.engine_eval || needs_special_start(info, flops_counted));
    return p.info;
  }

  // The same with the hash given: lets the tests make hashes collide.
  __attribute__((always_inline)) const NameInfo& lookup(const char* name, size_t n, uint64_t h) {
    uint32_t base = static_cast<uint32_t>(h >> 20);
    for (uint32_t p = 0; p < kProbes; ++p) {
      Slot& s = slots_[(base + p) & (kSlots - 1)];
      if (s.hash == h && s.length == n && same_bytes(s.text, name, n)) return s.info;
      if (s.hash == 0) return fill(s, h, name, n);
    }
    return fill(slots_[base & (kSlots - 1)], h, name, n);  // crowded: overwrite the home slot
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    const char* text = nullptr;  // the interned copy: lives as long as the process
    uint32_t length = 0;
    NameInfo info{};
  };
  static_assert(sizeof(Slot) == 32, "two slots per cache line");

  struct PointerSlot {
    const char* name = nullptr;  // fn.name() of a schema-named op, compared by address only
    NameInfo info{};
    bool plain = false;  // the op needs nothing beyond the common start (known_plain)
  };
  static_assert(sizeof(PointerSlot) == 24, "the plain flag fits in the slot's padding");
  // Direct-mapped: 2,048 slots (48 KiB a thread) keep the few dozen ops a loop runs from evicting
  // each other (512 measurably did, on P1's MLP step).
  static constexpr uint32_t kPointerSlotsLog2 = 11;

  PointerSlot& pointer_slot(const char* name) {
    uint64_t key = reinterpret_cast<uintptr_t>(name) * 0x9E3779B97F4A7C15ull;
    return pointer_slots_[key >> (64 - kPointerSlotsLog2)];
  }
  const NameInfo& fill(Slot& s, uint64_t h, const char* name, size_t n);
  void forget_pointers(uint64_t epoch);

  uint64_t pointer_epoch_ = 0;  // schema_names' epochs start at 1: the first lookup empties
  PointerSlot pointer_slots_[1u << kPointerSlotsLog2];
  Slot slots_[kSlots];
};

}  // namespace fqntrace

// Interned strings: op names, module fqns and type names travel through buffers as 32-bit ids.
// The process-wide table only grows; readers (the drain thread) look ids up without a lock.
// Each thread keeps a small cache from a content hash to an id, so the hot path never locks.
#pragma once
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace fqntrace {

constexpr uint32_t kEmptyNameId = 0;   // ""
constexpr uint32_t kGlobalFqnId = 1;   // "Global": no module running

class InternTable {
 public:
  static InternTable& instance();
  uint32_t intern(std::string_view s);      // takes a mutex: slow path only
  const std::string& str(uint32_t id) const;  // lock-free; id must come from intern()
  uint32_t size() const { return size_.load(std::memory_order_acquire); }

 private:
  InternTable();
  static constexpr uint32_t kChunkBits = 12;
  static constexpr uint32_t kChunkSize = 1u << kChunkBits;
  static constexpr uint32_t kMaxChunks = 4096;  // 16 M names: far beyond any real run
  std::mutex mu_;
  std::unordered_map<std::string_view, uint32_t> index_;
  std::atomic<std::string*> chunks_[kMaxChunks];
  std::atomic<uint32_t> size_{0};
};

// Word-at-a-time hash of a NUL-terminated name; never 0 (0 marks an empty cache slot).
inline uint64_t hash_name(const char* s) {
  size_t n = std::strlen(s);
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0x100000001B3ull);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, s + i, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  // The last 0..7 bytes without a variable-length memcpy (a library call): two overlapping
  // 4-byte loads, or three single bytes; either covers every byte of the tail.
  const char* p = s + i;
  size_t r = n - i;
  uint64_t w = 0;
  if (r >= 4) {
    uint32_t a, b;
    std::memcpy(&a, p, 4);
    std::memcpy(&b, p + r - 4, 4);
    w = a | (static_cast<uint64_t>(b) << 32);
  } else if (r > 0) {
    w = static_cast<uint8_t>(p[0]) | (static_cast<uint64_t>(static_cast<uint8_t>(p[r / 2])) << 8) |
        (static_cast<uint64_t>(static_cast<uint8_t>(p[r - 1])) << 16);
  }
  h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 29;
  return h | 1;
}

// What the observer wants to know about a name, computed once when a thread first meets it.
struct NameInfo {
  uint32_t id;
  uint32_t collective_name_id;  // interned collective kind ("allreduce") when collective != 0
  uint8_t flop_kind;            // FlopKind
  uint8_t engine_eval;          // "autograd::engine::evaluate_function: ..."
  uint8_t collective;           // collectives::kind_of, 0 for ordinary ops
  uint8_t collective_work;      // the backend's work range ("gloo:..."), not the issuing c10d op
  uint8_t compiled_region;      // "Torch-Compiled Region: ...": Dynamo runs compiled code inside
};

// Returns the NameInfo of a name never seen by this thread (slow path, may lock).
NameInfo describe_name(const char* name);

// Per-thread cache in front of the InternTable (lives inside the thread's state, no TLS of its own).
struct NameCache {
  static constexpr uint32_t kSlots = 2048;
  static constexpr uint32_t kProbes = 8;
  uint64_t keys[kSlots] = {};
  NameInfo infos[kSlots] = {};

  const NameInfo& lookup(const char* name) {
    uint64_t h = hash_name(name);
    uint32_t base = static_cast<uint32_t>(h >> 20);
    for (uint32_t p = 0; p < kProbes; ++p) {
      uint32_t slot = (base + p) & (kSlots - 1);
      if (keys[slot] == h) return infos[slot];
      if (keys[slot] == 0) return fill(slot, h, name);
    }
    return fill(base & (kSlots - 1), h, name);  // table crowded: overwrite the home slot
  }

 private:
  const NameInfo& fill(uint32_t slot, uint64_t h, const char* name) {
    infos[slot] = describe_name(name);
    keys[slot] = h;
    return infos[slot];
  }
};

}  // namespace fqntrace

// Interned strings: op names, module fqns and type names travel through buffers as 32-bit ids.
// The process-wide table only grows; readers (the drain thread) look ids up without a lock, and
// a string, once interned, never moves (its address stays valid for the life of the process).
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace fqntrace {

constexpr uint32_t kEmptyNameId = 0;  // ""
constexpr uint32_t kGlobalFqnId = 1;  // "Global": no module running

class InternTable {
 public:
  static InternTable& instance();
  uint32_t intern(std::string_view s);  // takes a mutex: slow path only
  // Lock-free; id must come from intern(). Inline: the drain resolves two or three ids per event.
  const std::string& str(uint32_t id) const {
    if (id >= size_.load(std::memory_order_acquire)) return unknown();
    const std::string* block = chunks_[id >> kChunkBits].load(std::memory_order_acquire);
    return block[id & (kChunkSize - 1)];
  }
  uint32_t size() const { return size_.load(std::memory_order_acquire); }

 private:
  InternTable();
  static const std::string& unknown();
  static constexpr uint32_t kChunkBits = 12;
  static constexpr uint32_t kChunkSize = 1u << kChunkBits;
  static constexpr uint32_t kMaxChunks = 4096;  // 16 M names: far beyond any real run
  std::mutex mu_;
  std::unordered_map<std::string_view, uint32_t> index_;
  std::atomic<std::string*> chunks_[kMaxChunks];
  std::atomic<uint32_t> size_{0};
};

}  // namespace fqntrace

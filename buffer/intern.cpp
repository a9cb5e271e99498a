#include "buffer/intern.h"

namespace fqntrace {

InternTable& InternTable::instance() {
  // Never destroyed: callbacks on other threads may still read it during process exit.
  static InternTable* table = new InternTable();
  return *table;
}

InternTable::InternTable() {
  for (auto& c : chunks_) c.store(nullptr, std::memory_order_relaxed);
  intern("");
  intern("Global");
}

uint32_t InternTable::intern(std::string_view s) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(s);
  if (it != index_.end()) return it->second;
  uint32_t id = size_.load(std::memory_order_relaxed);
  uint32_t chunk = id >> kChunkBits;
  if (chunk >= kMaxChunks) return kEmptyNameId;  // absurdly many names: degrade, never crash
  std::string* block = chunks_[chunk].load(std::memory_order_relaxed);
  if (block == nullptr) {
    block = new std::string[kChunkSize];
    chunks_[chunk].store(block, std::memory_order_release);
  }
  std::string& slot = block[id & (kChunkSize - 1)];
  slot.assign(s.data(), s.size());
  index_.emplace(std::string_view(slot), id);
  size_.store(id + 1, std::memory_order_release);
  return id;
}

const std::string& InternTable::unknown() {
  static const std::string kUnknown = "<unknown>";
  return kUnknown;
}

}  // namespace fqntrace

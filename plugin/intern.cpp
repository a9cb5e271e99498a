#include "plugin/intern.h"

#include "plugin/collectives.h"
#include "plugin/flops.h"

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

const std::string& InternTable::str(uint32_t id) const {
  static const std::string kUnknown = "<unknown>";
  if (id >= size_.load(std::memory_order_acquire)) return kUnknown;
  const std::string* block = chunks_[id >> kChunkBits].load(std::memory_order_acquire);
  return block[id & (kChunkSize - 1)];
}

}  // namespace fqntrace

namespace fqntrace {

NameInfo describe_name(const char* name) {
  static constexpr char kEngineEvalPrefix[] = "autograd::engine::evaluate_function: ";
  static constexpr char kCompiledRegionPrefix[] = "Torch-Compiled Region";
  NameInfo info;
  info.id = InternTable::instance().intern(name);
  info.flop_kind = static_cast<uint8_t>(flop_kind_of(name));
  info.engine_eval = std::strncmp(name, kEngineEvalPrefix, sizeof(kEngineEvalPrefix) - 1) == 0;
  info.compiled_region =
      std::strncmp(name, kCompiledRegionPrefix, sizeof(kCompiledRegionPrefix) - 1) == 0;
  bool is_work = false;
  info.collective = collectives::kind_of(name, &is_work);
  info.collective_work = is_work;
  info.collective_name_id =
      info.collective != 0 ? InternTable::instance().intern(collectives::kind_name(info.collective)) : 0;
  return info;
}

}  // namespace fqntrace

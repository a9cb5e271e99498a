#include "plugin/seq_map.h"

namespace fqntrace {

SeqMap& SeqMap::instance() {
  static SeqMap* map = new SeqMap();  // never destroyed: read by late callbacks at exit
  return *map;
}

SeqMap::SeqMap() {
  for (auto& t : tables_) t.store(nullptr, std::memory_order_relaxed);
}

SeqMap::Table* SeqMap::table_for(uint64_t logical_tid, uint32_t os_tid) {
  if (logical_tid >= kMaxThreads) {
    // Out of range: written, never read (its slots are atomics, so threads sharing it race
    // harmlessly), which spares every op's start a test.
    static Table* overflow = new Table(0);
    return overflow;
  }
  Table* t = tables_[logical_tid].load(std::memory_order_acquire);
  if (t != nullptr) return t;  // logical ids are never reused, so this is our own table
  t = new Table(os_tid);
  tables_[logical_tid].store(t, std::memory_order_release);
  return t;
}

bool SeqMap::lookup(uint64_t logical_tid, int64_t seq, uint32_t* fqn_id, uint64_t* start_ns,
                    uint32_t* os_tid) const {
  if (seq < 0 || logical_tid >= kMaxThreads) return false;
  const Table* t = tables_[logical_tid].load(std::memory_order_acquire);
  if (t == nullptr) return false;
  const Slot& s = t->slots[static_cast<uint64_t>(seq) & ((1u << kSlotsLog2) - 1)];
  uint64_t key = s.key.load(std::memory_order_acquire);
  uint64_t ts = s.ts.load(std::memory_order_relaxed);
  // Re-read the key: if the owner rewrote the slot meanwhile, ts may belong to another op.
  if (key != s.key.load(std::memory_order_acquire)) return false;
  if ((key & kValid) == 0 ||
      ((key >> 24) & ((1ull << 39) - 1)) != (static_cast<uint64_t>(seq) & ((1ull << 39) - 1))) {
    return false;
  }
  *fqn_id = static_cast<uint32_t>(key & 0xFFFFFFu);
  *start_ns = ts;
  *os_tid = t->os_tid;
  return true;
}

}  // namespace fqntrace

// (forward thread, sequence number) → (fqn, forward op start, OS thread): how a backward node
// finds the module whose forward created it. One direct-mapped table per forward thread, written
// only by that thread and read lock-free by backward threads. Bounded: a table has 2^16 slots,
// so a node whose forward ran more than 65536 autograd nodes earlier on that thread may find its
// slot reused; the lookup then fails (seq mismatch) and the node falls back to "Global".
#pragma once
#include <atomic>
#include <cstdint>

namespace fqntrace {

class SeqMap {
 public:
  static constexpr uint32_t kMaxThreads = 4096;  // RecordFunction's logical thread ids
  static constexpr uint32_t kSlotsLog2 = 16;

  struct Slot {
    std::atomic<uint64_t> key{0};  // valid bit | seq << 24 | fqn id
    std::atomic<uint64_t> ts{0};
  };
  struct Table {
    explicit Table(uint32_t tid) : os_tid(tid) {}
    const uint32_t os_tid;
    Slot slots[1u << kSlotsLog2];
  };

  static SeqMap& instance();

  // Slow path, once per thread: the table for this logical thread (an id out of range gets a
  // table no lookup reads).
  Table* table_for(uint64_t logical_tid, uint32_t os_tid);

  static void record(Table* t, int64_t seq, uint32_t fqn_id, uint64_t start_ns) {
    Slot& s = t->slots[static_cast<uint64_t>(seq) & ((1u << kSlotsLog2) - 1)];
    s.ts.store(start_ns, std::memory_order_relaxed);
    s.key.store(pack(seq, fqn_id), std::memory_order_release);
  }

  // Sampled mode: node `seq` was created inside module `fqn_id` (its scope's range of sequence
  // numbers). A slot already holding this seq and module keeps its start: a sampled op of this
  // module recorded it, and the node's flow can point at that op. A sampled op elsewhere that
  // only carried the number (ops that create no node see the next one) is overwritten.
  static void fill(Table* t, int64_t seq, uint32_t fqn_id) {
    Slot& s = t->slots[static_cast<uint64_t>(seq) & ((1u << kSlotsLog2) - 1)];
    uint64_t key = pack(seq, fqn_id);
    if (s.key.load(std::memory_order_relaxed) == key) return;
    s.ts.store(0, std::memory_order_relaxed);
    s.key.store(key, std::memory_order_release);
  }

  bool lookup(uint64_t logical_tid, int64_t seq, uint32_t* fqn_id, uint64_t* start_ns,
              uint32_t* os_tid) const;

 private:
  static constexpr uint64_t kValid = 1ull << 63;
  static uint64_t pack(int64_t seq, uint32_t fqn_id) {
    // seq's bits above 39 shift out (its bit 39 lands on kValid's): seq modulo 2^39, unmasked.
    return kValid | (static_cast<uint64_t>(seq) << 24) | (fqn_id & 0xFFFFFFu);
  }
  SeqMap();
  std::atomic<Table*> tables_[kMaxThreads];
};

}  // namespace fqntrace

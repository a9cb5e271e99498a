// A single-producer/single-consumer ring of RawEvents: the owner thread pushes, the drain thread
// drains. A full ring drops the newest event and counts it: memory stays bounded and the job is
// never blocked by tracing.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>

#include "buffer/event.h"

namespace fqntrace {

class EventRing {
 public:
  explicit EventRing(uint32_t capacity_log2);

  enum class Push { kOk, kHalfFull, kDropped };

  // Producer side (owner thread only). kHalfFull: stored, and the ring just reached half its
  // capacity, or, while the drain stays behind, half of the room that was left at the last look:
  // the caller should wake the drain thread (a few times per ring, never on every push).
  // kDropped: full, the event is counted as dropped.
  Push push(const RawEvent& e) {
    RawEvent* slot = claim();
    if (slot == nullptr) return Push::kDropped;
    *slot = e;
    return publish();
  }

  // push() in two halves, for a producer that builds its event in the slot itself (no 64-byte
  // temporary copied in): claim() gives the slot the next event goes to, or nullptr when the
  // ring is full (the event is then counted as dropped and publish() must not be called);
  // publish() makes the claimed slot visible to the drain and answers as push() does.
  RawEvent* claim() {
    uint64_t head = head_.load(std::memory_order_relaxed);
    if (__builtin_expect(head >= look_at_, 0) && !room_after_looking(head)) return nullptr;
    return &slots_[head & mask_].event;
  }
  // claim() without reading tail_: the slot, or nullptr when claim() would have to look at the
  // drain's progress first. Changes nothing, so a caller can still take another path.
  RawEvent* claim_if_room() {
    uint64_t head = head_.load(std::memory_order_relaxed);
    return __builtin_expect(head < look_at_, 1) ? &slots_[head & mask_].event : nullptr;
  }
  Push publish() {
    uint64_t head = head_.load(std::memory_order_relaxed) + 1;
    head_.store(head, std::memory_order_release);
    return head == look_at_ ? Push::kHalfFull : Push::kOk;
  }

  // Consumer side (drain thread only): calls f(const RawEvent&) for every published event.
  template <typename F>
  size_t drain(F&& f) {
    uint64_t tail = tail_.load(std::memory_order_relaxed);
    uint64_t head = head_.load(std::memory_order_acquire);
    for (uint64_t i = tail; i != head; ++i) f(slots_[i & mask_].event);
    tail_.store(head, std::memory_order_release);
    return static_cast<size_t>(head - tail);
  }

  bool empty() const {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
  }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  uint64_t capacity() const { return capacity_; }

 private:
  const uint64_t capacity_;
  const uint64_t mask_;
  struct alignas(64) Slot {  // one event per cache line: a push touches exactly one line
    RawEvent event;
  };
  static_assert(sizeof(Slot) == 64, "a slot is one cache line");
  std::unique_ptr<Slot[]> slots_;
  alignas(64) std::atomic<uint64_t> head_{0};
  uint64_t tail_cache_ = 0;  // producer's last view of tail_: avoids touching the consumer's line
  // The head at which the producer reads tail_ again: tail_cache_ + half the capacity, or, when
  // the ring was already half full at the last look, halfway to full.
  uint64_t look_at_;
  std::atomic<uint64_t> dropped_{0};
  alignas(64) std::atomic<uint64_t> tail_{0};

  // The head reached look_at_: is there room for one more after reading tail_ again? Out of line.
  // A drain that is behind (more than half the ring in use) moves the next look only halfway to
  // full, not one event on: a lagging drain costs the producer a few looks per ring, where a
  // look on every event cost each one the slow path.
  __attribute__((noinline)) bool room_after_looking(uint64_t head) {
    tail_cache_ = tail_.load(std::memory_order_acquire);
    uint64_t used = head - tail_cache_;
    if (used >= capacity_) {
      dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return false;
    }
    look_at_ =
        used < capacity_ / 2 ? tail_cache_ + capacity_ / 2 : head + (capacity_ - used + 1) / 2;
    return true;
  }
};

}  // namespace fqntrace

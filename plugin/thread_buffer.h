// Per-thread event buffers. Each traced thread owns one ring (single producer); the drain thread
// is the only consumer. A full ring drops the newest event and counts it: memory stays bounded
// and the job is never blocked by tracing.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "plugin/event.h"

namespace fqntrace {

class EventRing {
 public:
  explicit EventRing(uint32_t capacity_log2);

  enum class Push { kOk, kHalfFull, kDropped };

  // Producer side (owner thread only). kHalfFull: stored, and the ring just reached half its
  // capacity — the caller should wake the drain thread (at most once per half ring).
  // kDropped: full, the event is counted as dropped.
  Push push(const RawEvent& e) {
    uint64_t head = head_.load(std::memory_order_relaxed);
    if (head - tail_cache_ >= capacity_ / 2) {
      tail_cache_ = tail_.load(std::memory_order_acquire);
      if (head - tail_cache_ >= capacity_) {
        dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        return Push::kDropped;
      }
    }
    slots_[head & mask_].event = e;
    head_.store(head + 1, std::memory_order_release);
    return head + 1 - tail_cache_ == capacity_ / 2 ? Push::kHalfFull : Push::kOk;
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
  std::atomic<uint64_t> dropped_{0};
  alignas(64) std::atomic<uint64_t> tail_{0};
};

struct ThreadBuffer {
  ThreadBuffer(uint32_t os_tid, std::string name, uint32_t capacity_log2)
      : ring(capacity_log2), os_tid(os_tid), thread_name(std::move(name)) {}
  EventRing ring;
  const uint32_t os_tid;
  const std::string thread_name;
  std::atomic<bool> retired{false};  // the owner thread exited: free once drained
  uint64_t announced_generation = 0;  // drain thread only: session that named this thread
  std::shared_ptr<void> drain_state;  // drain thread only: per-thread reassembly (shapes)
};

// The session's list of buffers. Registration (once per thread) and the drain take the mutex.
class BufferRegistry {
 public:
  explicit BufferRegistry(uint32_t capacity_log2) : capacity_log2_(capacity_log2) {}
  ThreadBuffer* add(uint32_t os_tid, std::string name);

  // Drain thread: visit every buffer; afterwards free the retired ones that are empty.
  template <typename F>
  void for_each_and_reap(F&& f) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& b : buffers_) f(*b);
    for (size_t i = 0; i < buffers_.size();) {
      if (buffers_[i]->retired.load(std::memory_order_acquire) && buffers_[i]->ring.empty()) {
        retired_dropped_ += buffers_[i]->ring.dropped();
        buffers_[i] = std::move(buffers_.back());
        buffers_.pop_back();
      } else {
        ++i;
      }
    }
  }
  // The owner thread exited: free now if empty, else let the drain free it once drained.
  void retire(ThreadBuffer* buffer);
  uint64_t dropped_total();
  size_t size();

 private:
  const uint32_t capacity_log2_;
  std::mutex mu_;
  std::vector<std::unique_ptr<ThreadBuffer>> buffers_;
  uint64_t retired_dropped_ = 0;
};

}  // namespace fqntrace

// The per-thread buffers of the process: each traced thread owns one ThreadBuffer (its ring and
// what the drain needs to label it); the registry owns them all. Registration (once per thread),
// retirement and the drain take the mutex; pushing never does.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "buffer/event_ring.h"

namespace fqntrace {

struct ThreadBuffer {
  ThreadBuffer(uint32_t os_tid, std::string name, uint32_t capacity_log2)
      : ring(capacity_log2), os_tid(os_tid), thread_name(std::move(name)) {}
  EventRing ring;
  const uint32_t os_tid;
  const std::string thread_name;
  std::atomic<bool> retired{false};   // the owner thread exited: free once drained
  std::shared_ptr<void> drain_state;  // drain only: its per-thread reassembly (shapes)
};

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
  // Events dropped by every buffer so far, freed ones included.
  uint64_t dropped_total();

 private:
  const uint32_t capacity_log2_;
  std::mutex mu_;
  std::vector<std::unique_ptr<ThreadBuffer>> buffers_;
  uint64_t retired_dropped_ = 0;
};

}  // namespace fqntrace

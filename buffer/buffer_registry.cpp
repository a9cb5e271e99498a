#include "buffer/buffer_registry.h"

namespace fqntrace {

ThreadBuffer* BufferRegistry::add(uint32_t os_tid, std::string name) {
  auto buffer = std::make_unique<ThreadBuffer>(os_tid, std::move(name), capacity_log2_);
  ThreadBuffer* raw = buffer.get();
  std::lock_guard<std::mutex> lock(mu_);
  buffers_.push_back(std::move(buffer));
  return raw;
}

void BufferRegistry::retire(ThreadBuffer* buffer) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!buffer->ring.empty()) {
    buffer->retired.store(true, std::memory_order_release);
    return;
  }
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (buffers_[i].get() == buffer) {
      retired_dropped_ += buffer->ring.dropped();
      buffers_[i] = std::move(buffers_.back());
      buffers_.pop_back();
      return;
    }
  }
}

uint64_t BufferRegistry::dropped_total() {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t total = retired_dropped_;
  for (auto& b : buffers_) total += b->ring.dropped();
  return total;
}

}  // namespace fqntrace

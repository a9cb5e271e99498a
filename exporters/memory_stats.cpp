#include "exporters/memory_stats.h"

#include <algorithm>

namespace fqntrace {

namespace {
constexpr int kBackward = 1;  // Phase::kBackward
}

const std::vector<MemoryStats::Node*>& MemoryStats::chain_of(const std::string& fqn) {
  auto it = chains_.find(&fqn);
  if (it != chains_.end()) return it->second;
  std::vector<Node*> chain{&nodes_[fqn]};
  for (size_t dot = fqn.rfind('.'); dot != std::string::npos && dot > 0; dot = fqn.rfind('.', dot - 1)) {
    chain.push_back(&nodes_[fqn.substr(0, dot)]);
  }
  return chains_.emplace(&fqn, std::move(chain)).first->second;
}

void MemoryStats::close(const Run& r) {
  uint64_t& peak = r.node->phase[r.phase].peak;
  peak = std::max(peak, static_cast<uint64_t>(r.peak));
}

void MemoryStats::sample(uint32_t tid, const std::string& fqn, int phase, uint64_t ptr,
                         int64_t bytes) {
  const std::vector<Node*>& chain = chain_of(fqn);
  std::vector<Run>& runs = runs_[tid];
  // Runs of modules this report is not inside (or of another phase) have ended.
  auto outside = [&](const Run& r) {
    return r.phase != phase || std::find(chain.begin(), chain.end(), r.node) == chain.end();
  };
  for (const Run& r : runs) {
    if (outside(r)) close(r);
  }
  runs.erase(std::remove_if(runs.begin(), runs.end(), outside), runs.end());
  for (Node* n : chain) {
    bool open = std::any_of(runs.begin(), runs.end(), [n](const Run& r) { return r.node == n; });
    if (!open) runs.push_back(Run{n, phase, seq_, 0, 0});
  }
  Numbers& self = chain.front()->phase[phase];
  if (bytes > 0) {
    self.alloc += static_cast<uint64_t>(bytes);
    for (Run& r : runs) {
      r.live += bytes;
      r.peak = std::max(r.peak, r.live);
    }
    live_[ptr] = Block{bytes, seq_, tid, chain.front(), phase};
  } else if (bytes < 0) {
    self.freed += static_cast<uint64_t>(-bytes);
    auto it = live_.find(ptr);
    if (it != live_.end()) {
      const Block& b = it->second;
      // Only runs that were open when the block was allocated counted it.
      for (Run& r : runs) {
        if (b.tid == tid && b.seq >= r.start_seq) r.live -= b.bytes;
      }
      if (phase == kBackward && b.phase != kBackward) b.node->phase[b.phase].activation += b.bytes;
      if (phase != kBackward && b.phase == kBackward) b.node->phase[b.phase].grad += b.bytes;
      live_.erase(it);
    }
  }
  ++seq_;
}

void MemoryStats::module_end(uint32_t tid, const std::string& fqn, int phase) {
  auto rt = runs_.find(tid);
  auto nt = nodes_.find(fqn);
  if (rt == runs_.end() || nt == nodes_.end()) return;
  std::vector<Run>& runs = rt->second;
  Node* node = &nt->second;
  auto ended = [&](const Run& r) { return r.node == node && r.phase == phase; };
  for (const Run& r : runs) {
    if (ended(r)) close(r);
  }
  runs.erase(std::remove_if(runs.begin(), runs.end(), ended), runs.end());
}

void MemoryStats::finish() {
  for (auto& [tid, runs] : runs_) {
    for (const Run& r : runs) close(r);
    runs.clear();
  }
  for (auto& [ptr, b] : live_) {
    if (b.phase == kBackward) b.node->phase[b.phase].grad += b.bytes;
  }
  live_.clear();
}

const MemoryStats::Numbers* MemoryStats::find(const std::string& fqn, int phase) const {
  auto it = nodes_.find(fqn);
  return it != nodes_.end() ? &it->second.phase[phase] : nullptr;
}

}  // namespace fqntrace

// What fqntrace attributed to each RecordFunction torch.profiler recorded: while torch.profiler
// records, every range carries its RecordFunction's handle (Kineto's "Record function id"), and
// the drain keeps (handle → fqn, phase, module class) here, so the traced process can annotate
// the trace torch.profiler exports (python/fqntrace/_kineto_hook.py) without reading its own
// trace back. One recording's worth: cleared when the next recording starts; capped.
#pragma once
#include <cstdint>
#include <vector>

#include "buffer/event.h"

namespace fqntrace {

struct RfEntry {
  uint64_t rf_id;
  uint32_t fqn_id;
  uint32_t type_id;  // kModule: the class name id, else 0
  Phase phase;
};

// Owned by the Drainer: used by whoever holds the drain (the session's drain lock).
class RfAttribution {
 public:
  static constexpr size_t kMaxEntries = 1 << 24;  // 16 M ranges (384 MB): far beyond a recording
  void add(const RfEntry& e) {
    if (entries_.size() < kMaxEntries) entries_.push_back(e);
  }
  void clear() {
    entries_.clear();
    entries_.shrink_to_fit();
  }
  const std::vector<RfEntry>& entries() const { return entries_; }

 private:
  std::vector<RfEntry> entries_;
};

}  // namespace fqntrace

// What validate's stream checks keep while the events go by (analysis/engine_checks.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace fqntrace::analysis::engine {

// The ranges of one thread whose enclosing range has not come yet (validate_stream._StreamChecks).
struct CheckThread {
  struct Range {
    int64_t start, end;
    bool has_depth;
    int64_t depth;
  };
  std::vector<Range> stack;
  bool seen = false;
  int64_t last_end = 0;
};

// A flow: (cat, id) with the cat a string or missing (kNone), the id an int or a string.
struct FlowKey {
  uint32_t cat;
  bool is_int;
  int64_t id;  // the int, or the string's interned id
  bool operator==(const FlowKey& o) const {
    return cat == o.cat && is_int == o.is_int && id == o.id;
  }
};
struct FlowKeyHash {
  size_t operator()(const FlowKey& k) const {
    return std::hash<int64_t>()(k.id) * 31 + (size_t(k.cat) << 1) + k.is_int;
  }
};

// The flows that had both ends: the core numbers flows 1, 2, 3, ..., so the ints are kept as
// ranges of consecutive numbers (a handful), as validate_stream._IdSet does.
class ClosedFlows {
 public:
  bool contains(const FlowKey& k) const {
    if (!k.is_int) return texts_.count(k) != 0;
    auto cat = ranges_.find(k.cat);
    if (cat == ranges_.end()) return false;
    auto it = cat->second.upper_bound(k.id);  // the first range starting after the id
    return it != cat->second.begin() && k.id <= std::prev(it)->second;
  }
  void add(const FlowKey& k) {
    if (!k.is_int) {
      texts_.insert(k);
      return;
    }
    auto& ranges = ranges_[k.cat];
    auto it = ranges.upper_bound(k.id);
    if (it != ranges.begin() && reaches(std::prev(it)->second, k.id)) {
      it = std::prev(it);
      it->second = std::max(it->second, k.id);
    } else {
      it = ranges.emplace(k.id, k.id).first;
    }
    auto next = std::next(it);
    if (next != ranges.end() && reaches(it->second, next->first)) {  // joins the next range
      it->second = std::max(it->second, next->second);
      ranges.erase(next);
    }
  }

 private:
  // Does a range ending at `end` reach `id` when extended by one? (no overflow at INT64_MAX)
  static bool reaches(int64_t end, int64_t id) {
    return id <= end || (end < INT64_MAX && id == end + 1);
  }

  std::unordered_map<uint32_t, std::map<int64_t, int64_t>> ranges_;  // cat -> start -> end
  std::unordered_set<FlowKey, FlowKeyHash> texts_;
};

struct Checks {
  std::vector<CheckThread> threads;  // by the engine's thread index
  int64_t n_threads = 0;
  enum : uint8_t { kSpan = 1, kFirstOp = 2 };
  std::vector<uint8_t> fqn_flags;  // string id -> kSpan | kFirstOp
  bool compiled = false;           // compiled code ran (docs/compile.md): Python judges spans
  std::unordered_map<FlowKey, std::pair<int64_t, int64_t>, FlowKeyHash> open;  // (s, f) counts
  ClosedFlows closed;
  bool python = false;  // a problem, or something only the Python checks judge
};

}  // namespace fqntrace::analysis::engine

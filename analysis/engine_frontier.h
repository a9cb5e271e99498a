// The per-thread frame stack of the summary engine: ranges whose enclosing range has not come yet
// (a post-order stream), with the op time they hold grouped by owner
// (analysis/engine_frontier.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fqntrace::analysis::engine {

struct Contrib {
  uint64_t key;  // name id << 32 | step slot (0: no step)
  int64_t ns, count;
};

// A small map with a hash index once it grows: most frontier groups hold one or two entries,
// the outermost ones (a whole step's ops) thousands. The first entry lives in the map itself,
// so a group of one op, a range that ends and is merged or counted, allocates nothing.
template <class T>
class SmallMap {
 public:
  // The entries, in the order added.
  struct Items {
    T* first;
    T* last;
    T* begin() const { return first; }
    T* end() const { return last; }
  };

  T* find(uint64_t key) {
    if (index_ != nullptr) {
      auto it = index_->find(key);
      return it == index_->end() ? nullptr : &spill_[it->second];
    }
    for (T& item : items())
      if (item.key == key) return &item;
    return nullptr;
  }
  T& add(T item) {
    if (spill_.empty()) {
      if (inline_size_ == 0) {
        first_ = std::move(item);
        inline_size_ = 1;
        return first_;
      }
      spill_.push_back(std::move(first_));  // a second entry: both in the vector from now on
      inline_size_ = 0;
    }
    spill_.push_back(std::move(item));
    if (index_ != nullptr) {
      index_->emplace(spill_.back().key, spill_.size() - 1);
    } else if (spill_.size() > 16) {
      index_ = std::make_unique<std::unordered_map<uint64_t, size_t>>();
      for (size_t k = 0; k < spill_.size(); ++k) index_->emplace(spill_[k].key, k);
    }
    return spill_.back();
  }
  void clear() {
    inline_size_ = 0;
    spill_.clear();  // keeps its capacity for the next ranges held here
    index_.reset();
  }
  size_t size() const { return spill_.empty() ? inline_size_ : spill_.size(); }
  Items items() {
    if (spill_.empty()) return {&first_, &first_ + inline_size_};
    return {spill_.data(), spill_.data() + spill_.size()};
  }

 private:
  T first_{};
  size_t inline_size_ = 0;  // first_ holds an entry (while spill_ is empty)
  std::vector<T> spill_;
  std::unique_ptr<std::unordered_map<uint64_t, size_t>> index_;
};

struct Group {
  uint64_t key;  // owner: phase key << 32 | fqn id
  int64_t dur = 0, excluded = 0;
  SmallMap<Contrib> contribs;
};

struct Pending {
  int64_t start = 0, end = 0;
  bool has_depth = false;
  int64_t depth = 0;
  SmallMap<Group> groups;
};

struct Thread {
  std::vector<Pending> stack;  // slots [0, size) are live; the rest keep their capacity
  size_t size = 0;
  bool seen = false;  // a range of this thread was read (last_end is set)
  int64_t last_end = 0;
  // memory runs: [node, phase, start_seq, live, peak]
  struct Run {
    uint32_t node;
    int phase;
    int64_t start_seq, live, peak;
  };
  std::vector<Run> runs;
};

struct Block {
  int64_t size, seq;
  uint32_t thread;
  uint32_t node;
  int phase;
};

// One group into a map of them: summed into the group of its owner, or added.
inline void merge_group(SmallMap<Group>& into, Group&& g) {
  Group* mine = into.find(g.key);
  if (mine == nullptr) {
    into.add(std::move(g));
    return;
  }
  mine->dur += g.dur;
  mine->excluded += g.excluded;
  for (auto& c : g.contribs.items()) {
    Contrib* t = mine->contribs.find(c.key);
    if (t == nullptr) {
      mine->contribs.add(c);
    } else {
      t->ns += c.ns;
      t->count += c.count;
    }
  }
}

inline void merge_groups(SmallMap<Group>& into, SmallMap<Group>& from) {
  if (from.size() > into.size()) std::swap(into, from);  // sums: the direction does not matter
  for (auto& g : from.items()) merge_group(into, std::move(g));
  from.clear();
}

}  // namespace fqntrace::analysis::engine

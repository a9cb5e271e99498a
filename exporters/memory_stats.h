// Per-module memory numbers from the kMemory records (FQNTRACE_MEMORY; rules in docs/memory.md),
// built on the drain side in arrival order, never in a callback. Per module (fqn) and phase:
//   alloc / freed: bytes allocated / freed while the module's own ops ran (self; the summary adds
//     descendants, as for time);
//   activation: bytes allocated in that phase (forward or recompute) and freed during backward;
//   grad: bytes allocated in backward that outlive it (freed outside backward, or never): the
//     gradients kept in .grad (AccumulateGrad steals the computing node's tensor, so the
//     allocation is the node's and the module that owns it);
//   peak: the highest total of live bytes allocated during one run of the module (its subtree
//     included) — a run is a stretch of reports on one thread inside the module's subtree in one
//     phase, ended by a report elsewhere or by the module's own end.
// A free whose allocation was not seen (made before tracing) counts as freed, never against live
// bytes, so nothing goes negative. python/fqntrace/analysis/memory.py computes the same numbers.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace fqntrace {

class MemoryStats {
 public:
  static constexpr int kPhases = 3;
  struct Numbers {
    uint64_t alloc = 0;
    uint64_t freed = 0;
    uint64_t activation = 0;
    uint64_t grad = 0;
    uint64_t peak = 0;
  };

  // One kMemory record. `fqn` is interned (its address is stable and identifies it).
  void sample(uint32_t tid, const std::string& fqn, int phase, uint64_t ptr, int64_t bytes);
  // A module's range (kModule) ended on thread `tid`: its run ends with it.
  void module_end(uint32_t tid, const std::string& fqn, int phase);
  // Ends every open run; call once before reading the numbers.
  void finish();
  bool empty() const { return nodes_.empty(); }
  // The numbers of `fqn` (a module, or a container prefix of one) in `phase`; nullptr if none.
  const Numbers* find(const std::string& fqn, int phase) const;

 private:
  struct Node {
    Numbers phase[kPhases];
  };
  struct Run {
    Node* node;
    int phase;
    uint64_t start_seq;  // reports numbered from here on belong to this run
    int64_t live;
    int64_t peak;
  };
  struct Block {
    int64_t bytes;
    uint64_t seq;
    uint32_t tid;
    Node* node;
    int phase;
  };

  const std::vector<Node*>& chain_of(const std::string& fqn);
  static void close(const Run& r);

  std::unordered_map<std::string, Node> nodes_;  // element addresses are stable
  std::unordered_map<const std::string*, std::vector<Node*>> chains_;  // self, parent, …, root
  std::unordered_map<uint32_t, std::vector<Run>> runs_;  // open runs, by thread
  std::unordered_map<uint64_t, Block> live_;  // allocations not yet freed, by address
  uint64_t seq_ = 0;
};

}  // namespace fqntrace

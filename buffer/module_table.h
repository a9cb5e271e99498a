// The module table: every module fqntrace has named (fqn, class, parent fqn, as interned ids),
// once per distinct entry, in the order named. The trace carries it as one metadata line per
// entry (docs/trace-format.md, *Module table*), so a module that owns work but never ran through
// `nn.Module.__call__` (a submodule of an exported GraphModule or of a TorchScript module, whose
// parameters' gradients are still accumulated) is known to readers by its class and place in the
// tree. Written from the naming side (Python's naming walk, the C++ API), read by the drain: off
// the hot path, so a mutex guards it.
#pragma once
#include <cstdint>
#include <mutex>
#include <unordered_set>
#include <vector>

namespace fqntrace {

struct ModuleEntry {
  uint32_t fqn_id;
  uint32_t type_id;
  uint32_t parent_id;  // the parent's fqn; kEmptyNameId for a root
};

class ModuleTable {
 public:
  static ModuleTable& instance();
  // Adds the entry unless the same (fqn, class, parent) is already there.
  void declare(uint32_t fqn_id, uint32_t type_id, uint32_t parent_id);
  // Appends the entries from index `from` on to *out; returns the table's size (the next `from`).
  size_t read_from(size_t from, std::vector<ModuleEntry>* out) const;

 private:
  mutable std::mutex mu_;
  std::vector<ModuleEntry> entries_;
  std::unordered_set<uint64_t> seen_;  // (fqn, class, parent) packed in one key: duplicates dropped
};

}  // namespace fqntrace

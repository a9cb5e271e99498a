#include "buffer/module_table.h"

namespace fqntrace {

ModuleTable& ModuleTable::instance() {
  static ModuleTable* table = new ModuleTable();  // never destroyed: read at exit by the drain
  return *table;
}

void ModuleTable::declare(uint32_t fqn_id, uint32_t type_id, uint32_t parent_id) {
  // The three ids pack into one key when the fqn is below 2^24 and the others below 2^20
  // (millions of names); an entry with larger ids is kept without the duplicate check.
  uint64_t key = (uint64_t{fqn_id} << 40) ^ (uint64_t{type_id} << 20) ^ parent_id;
  bool exact = fqn_id < (1u << 24) && type_id < (1u << 20) && parent_id < (1u << 20);
  std::lock_guard<std::mutex> lock(mu_);
  if (exact && !seen_.insert(key).second) return;
  entries_.push_back({fqn_id, type_id, parent_id});
}

size_t ModuleTable::read_from(size_t from, std::vector<ModuleEntry>* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = from; i < entries_.size(); ++i) out->push_back(entries_[i]);
  return entries_.size();
}

}  // namespace fqntrace

#include "plugin/compiled_graph.h"

#include <algorithm>
#include <deque>

#include "buffer/intern.h"

namespace fqntrace {

CompiledGraph::CompiledGraph(std::vector<uint32_t> name_ids, std::vector<std::string> rel_paths,
                             std::string root_type)
    : name_ids_(std::move(name_ids)),
      rel_paths_(std::move(rel_paths)),
      root_type_(std::move(root_type)) {
  std::vector<std::pair<uint32_t, size_t>> calls;
  calls.reserve(name_ids_.size());
  for (size_t i = 0; i < name_ids_.size(); ++i) calls.emplace_back(name_ids_[i], i);
  std::sort(calls.begin(), calls.end());
  for (size_t i = 0; i < calls.size(); ++i) {
    bool repeated = (i > 0 && calls[i - 1].first == calls[i].first) ||
                    (i + 1 < calls.size() && calls[i + 1].first == calls[i].first);
    if (!repeated) unique_calls_.push_back(calls[i]);
  }
}

size_t CompiledGraph::only_call_named(uint32_t name_id) const {
  auto it = std::lower_bound(unique_calls_.begin(), unique_calls_.end(),
                             std::make_pair(name_id, size_t{0}));
  return it != unique_calls_.end() && it->first == name_id ? it->second : kNotUnique;
}

const uint32_t* CompiledGraph::fqns_under(uint32_t root_fqn_id) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [root, fqns] : roots_) {
    if (root == root_fqn_id) return fqns.get();
  }
  auto fqns = std::make_unique<uint32_t[]>(name_ids_.size() + 1);
  InternTable& names = InternTable::instance();
  bool outside_modules = root_fqn_id == kGlobalFqnId && !root_type_.empty();
  const std::string root = outside_modules ? root_type_ : names.str(root_fqn_id);
  uint32_t root_id = outside_modules ? names.intern(root) : root_fqn_id;
  for (size_t i = 0; i < rel_paths_.size(); ++i) {
    fqns[i] = rel_paths_[i].empty() ? root_id : names.intern(root + rel_paths_[i]);
  }
  roots_.emplace_back(root_fqn_id, std::move(fqns));
  return roots_.back().second.get();
}

namespace {
std::mutex registry_mu;
std::deque<std::unique_ptr<CompiledGraph>> registry;  // id i lives at index i - 1
}  // namespace

uint32_t register_compiled_graph(std::vector<uint32_t> name_ids, std::vector<std::string> rel_paths,
                                 std::string root_type) {
  auto graph = std::make_unique<CompiledGraph>(std::move(name_ids), std::move(rel_paths),
                                               std::move(root_type));
  std::lock_guard<std::mutex> lock(registry_mu);
  registry.push_back(std::move(graph));
  return static_cast<uint32_t>(registry.size());
}

CompiledGraph* find_compiled_graph(uint32_t id) {
  std::lock_guard<std::mutex> lock(registry_mu);
  return id >= 1 && id <= registry.size() ? registry[id - 1].get() : nullptr;
}

}  // namespace fqntrace

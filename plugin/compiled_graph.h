// Compiled graphs (torch.compile with inductor). A compiled graph runs as straight-line code that
// calls its kernels one after another; the Python side (python/fqntrace/_compile.py) learns at
// compile time which module each call was generated from and registers that list here, once per
// graph. While the graph runs on a thread, the observer names each op it calls directly by
// walking this list in step (observer.cpp, name_graph_op).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace fqntrace {

class CompiledGraph {
 public:
  // names: the RecordFunction name each call shows up as ("aten::addmm", "cpp_fused_relu_0");
  // rel_paths: its module's path below the compiled module (".blocks.0.fc1"; "" for the module
  // itself). Same length. root_type: class name of the module the paths start from, the root's
  // name when the graph runs outside any module (a compiled function given the model).
  CompiledGraph(std::vector<uint32_t> name_ids, std::vector<std::string> rel_paths,
                std::string root_type);

  static constexpr size_t kNotUnique = SIZE_MAX;

  size_t size() const { return name_ids_.size(); }
  uint32_t name_id(size_t i) const { return name_ids_[i]; }
  // The index of the one call named `name_id`, or kNotUnique when the graph makes none or
  // several (a sampled trace sees a fraction of the calls, so only such a name places an op).
  size_t only_call_named(uint32_t name_id) const;

  // The fqn id of every call when the graph runs for module `root_fqn_id` (the same graph
  // serves every block of the same shape). Built once per root under a mutex; the array lives as
  // long as the graph (never freed: graphs live for the process).
  const uint32_t* fqns_under(uint32_t root_fqn_id);

 private:
  const std::vector<uint32_t> name_ids_;
  const std::vector<std::string> rel_paths_;
  const std::string root_type_;
  std::vector<std::pair<uint32_t, size_t>> unique_calls_;  // (name id, index), by name id
  std::mutex mu_;
  std::vector<std::pair<uint32_t, std::unique_ptr<uint32_t[]>>> roots_;
};

// Registers a graph; returns its id (>= 1). Thread-safe.
uint32_t register_compiled_graph(std::vector<uint32_t> name_ids, std::vector<std::string> rel_paths,
                                 std::string root_type);
// The graph with id `id`, or nullptr.
CompiledGraph* find_compiled_graph(uint32_t id);

}  // namespace fqntrace

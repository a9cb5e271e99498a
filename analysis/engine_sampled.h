// What Mode::kSampled keeps per thread (fqntrace.analysis.sampled.SampledSummary's rules): the
// complete ranges and sampled ops not yet enclosed by a later range. Internal to the engine.
#pragma once

#include <cstdint>
#include <vector>

namespace fqntrace::analysis::engine {

// How much deeper than the program's own calls an op lies when an op called it (bytes of stack,
// sampled.NESTED_BYTES).
constexpr int64_t kNestedBytes = 512;

// A finished module scope, top-level scope or autograd node.
struct SampledRange {
  int64_t start, end, dur;
};

// A sampled op outside every complete range: what its estimate needs (sampled._Loose).
struct LooseOp {
  int64_t start, end;
  uint32_t pid_key, fqn, phase;
  bool has_stack_depth;
  int64_t stack_depth;
};

struct SampledThread {
  bool listed = false;              // in State::sampled_order
  std::vector<SampledRange> walls;  // module scopes and top-level scopes
  std::vector<SampledRange> nodes;  // autograd nodes
  std::vector<LooseOp> loose;       // sampled ops outside every complete range
  std::vector<LooseOp> settled;     // loose ops nothing can enclose any more: counted at the end
};

}  // namespace fqntrace::analysis::engine

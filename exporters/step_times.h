// Per-step op time for the summary exporter: which training step (ProfilerStep#N range) each
// top-level op started in, and each (fqn, phase)'s time per step, for the per-step medians of
// <stem>.summary.json (the same numbers as `python -m fqntrace summary --json`, steps.py).
// Events arrive in end order and a step's range only when the step ends, so ops that start after
// the last step range seen wait (at most one step's top-level ops) until the next range arrives.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace fqntrace {

class StepTimes {
 public:
  // A ProfilerStep#`step` range, [start_ns, end_ns).
  void step_range(uint64_t step, uint64_t start_ns, uint64_t end_ns);
  // A top-level op's own time, attributed to (fqn_id, phase).
  void op(uint64_t start_ns, uint32_t fqn_id, int phase, uint64_t own_ns);

  bool empty() const { return ranges_.empty(); }
  // `"steps": {...}` (with its leading ", ") — step 0 left out of the medians, as the CLI does.
  // Fills `medians`: fqn → per phase (median of the subtree's time per step, median of its own).
  using Medians = std::map<std::string, std::vector<std::pair<uint64_t, uint64_t>>>;
  // Fills `own_per_step`: fqn → its own time (all phases) in each kept step, in step order: the
  // samples `python -m fqntrace diff` tests (a module absent from it ran in no kept step).
  using Samples = std::map<std::string, std::vector<uint64_t>>;
  // Fills `spread_milli_pct`: fqn → 1.4826 * MAD / median of its subtree time per kept step (all
  // phases), in thousandths of a percent; absent when that median is 0 (stats.py).
  using Spreads = std::map<std::string, uint64_t>;
  void finish(const std::unordered_map<uint32_t, const std::string*>& fqn_of, int phases,
              std::string* json_out, Medians* medians, Samples* own_per_step,
              Spreads* spread_milli_pct);
  // Steps the medians cover (known after finish()).
  size_t kept_count() const { return kept_count_; }

 private:
  struct Range {
    uint64_t step, start, end;
  };
  struct Pending {
    uint64_t start;
    uint64_t key;  // fqn_id << 2 | phase
    uint64_t ns;
  };
  void place(const Pending& p);

  std::vector<Range> ranges_;  // in arrival order (steps end in order)
  std::vector<std::unordered_map<uint64_t, uint64_t>> times_;  // by index into ranges_
  std::vector<Pending> pending_;
  bool overflowed_ = false;
  size_t kept_count_ = 0;
};

}  // namespace fqntrace

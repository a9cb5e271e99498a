// The streaming summary's per-event work in native code (the CLI's `summary`, `report`, `diff`,
// cross-rank summary): the one definition of op time for a stream of trace events, the same
// rules as fqntrace.analysis.summarize.StreamSummary (the frontier algorithm for post-order
// streams), step_times (per-step time) and memory (memory stats). Links no libtorch.
//
// Events arrive as text: blocks of whole event lines (the core's layout; a Chrome line may end
// with a comma) or one event at a time. A block is parsed completely (simdjson On-Demand, only
// the fields the summary reads, the rest validated) before any event of it counts, so a block
// that is not whole events in that layout changes nothing and the reader can read it another
// way. The Python side turns the sums into the summary dict (summary_totals.summary_result).
//
// The same parser serves `validate` (Mode::kChecks: validate's per-event, nesting, flow and span
// checks instead of the sums, a verdict on files that pass) and `top` (Mode::kLive: the sums and
// a log of the time counted and the step ranges read, for its per-second window), and `repair`
// (Mode::kCount: the events read and the "X" events among them, nothing else), and a sampled
// trace's summary (Mode::kSampled: fqntrace.analysis.sampled's rules, the sums and the estimates'
// variance).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace fqntrace::analysis {

inline constexpr int kPhases = 3;  // forward, backward, recompute (traceio.PHASES' order)

struct PhaseSums {
  int64_t self_ns = 0, self_ops = 0, self_flops = 0, comm_ns = 0, comm_bytes = 0;
  int64_t collectives = 0, device_ns = 0;
  int64_t cpu_ns = 0;  // self CPU time (args.self_cpu_ns)
  std::unordered_map<uint32_t, std::pair<int64_t, int64_t>> top;  // name id -> (ns, count)
};

struct ModuleSums {
  uint32_t fqn = 0;
  std::string module_type;
  int64_t calls = 0;
  int64_t first_seen = 0;
  PhaseSums phases[kPhases];
};

inline constexpr int kMemoryFields = 5;  // alloc, freed, peak, activation, grad (memory.FIELDS)

struct MemoryNode {
  uint32_t fqn = 0;
  int64_t numbers[kPhases][kMemoryFields] = {};
  int64_t live_grad = 0;  // backward bytes still allocated at the end (finish())
};

// validate's stream checks on files that pass (validate_stream._StreamChecks): a verdict, or "ask
// the Python checks", which name the problem (or judge what the engine leaves to them).
struct CheckResult {
  bool judged = false;  // false: a problem, or something only the Python checks judge
  int64_t threads = 0, loose_flows = 0, missing_fqns = 0;
};

// What top's live view needs besides the sums, in the order it happened (top.live.LiveSummary):
// counted time (StreamSummary.commit), the ProfilerStep ranges read (LiveSummary.seen) and self
// CPU times read (args.self_cpu_ns).
struct LiveRecord {
  enum Kind : uint8_t { kCounted, kStep, kCpu } kind;
  uint8_t phase_or_annotation;  // kCounted, kCpu: the phase; kStep: cat is user_annotation
  uint32_t text;                // kCounted, kCpu: the fqn; kStep: the range's name (name())
  int64_t a, b;                 // kCounted, kCpu: when (ns), self ns; kStep: start, end (ns)
};

// kSampled: the variance of a module's estimated time in a phase (ns^2).
struct Variance {
  uint32_t fqn;
  int phase;
  double ns2;
};

class SummaryEngine {
 public:
  static constexpr long kInvalid = -1;       // not whole events in this layout: nothing counted
  static constexpr long kNotPostOrder = -2;  // a thread's events are not in end order
  static constexpr long kProblem = -3;       // kChecks: the Python checks must judge the file

  // kSummary: the sums; kChecks: validate's checks instead; kLive: the sums and a LiveRecord log;
  // kCount: only how many events were read and how many are "X" (slices()); kSampled: a sampled
  // trace's sums (set_sample() first).
  enum class Mode { kSummary, kChecks, kLive, kCount, kSampled };

  explicit SummaryEngine(bool jsonl, Mode mode = Mode::kSummary);
  ~SummaryEngine();

  // A ProfilerStep#N range of a process (pid as a typed key, see pid_key()), before any event.
  void add_step_range(const std::string& pid_key, int64_t start, int64_t end, int64_t step);
  // Events of a block (lines of whole events), kInvalid or kNotPostOrder.
  long feed_block(const char* data, size_t size);
  // One event (a JSON object), 1, kInvalid or kNotPostOrder.
  long feed_event(const char* data, size_t size);
  // kSampled: the trace's sampling probability (0 < p < 1) and whether its backward module spans
  // carry the nodes' time (header "sampleNodeSpans"), before any event.
  void set_sample(double p, bool node_spans);
  // Counts what is still pending and closes memory runs; then the results below are final.
  void finish();

  const std::vector<ModuleSums>& modules() const;
  // (fqn id, class id) of the module table's entries (docs/trace-format.md, *Module table*): the
  // class of a module that has no span; the reader fills it in where a row has none.
  std::vector<std::pair<uint32_t, uint32_t>> declared_types() const;
  const std::vector<MemoryNode>& memory_nodes() const;
  bool memory_seen() const;
  bool device_seen() const;
  const std::string& fqn(uint32_t id) const;
  const std::string& name(uint32_t id) const;
  // (step, fqn id, phase) -> ns of the steps' self time (cpu: self CPU time), in no particular
  // order.
  void for_each_step_time(void (*visit)(void*, int64_t, uint32_t, int, int64_t), void* ctx,
                          bool cpu = false) const;
  bool cpu_seen() const;  // some range carried self_cpu_ns
  // kSampled, after finish(): the estimates' variance per module and phase, in no particular order.
  std::vector<Variance> variances() const;

  // kCount: the events fed whose "ph" is "X" (the count a repaired tail writes).
  int64_t slices() const;

  // kChecks, once every event is fed; incomplete: the trace may lack events (cut, dropped).
  CheckResult check_result(bool incomplete) const;

  // kLive: counts the pending ranges nothing can enclose any more (depth 0), as
  // StreamSummary.commit_pending(outermost_only=True); then the log since the last take.
  void settle();
  std::vector<LiveRecord> take_log();
  // kLive: the first start and the latest end (ns) of the ranges read; false before any.
  bool live_span(int64_t& first, int64_t& latest) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace fqntrace::analysis

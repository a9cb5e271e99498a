// The summary engine's state and the work on it, one concern per file:
//   engine_parse.cpp     event text to Events (simdjson On-Demand)
//   engine_plain_line.cpp  the core's plain event lines to Events without simdjson
//   engine_frontier.cpp  one event through its thread's frame stack (StreamSummary.add)
//   engine_totals.cpp    what a counted range adds: module totals, per-step time, memory
//   engine_checks.cpp    validate's stream checks (Mode::kChecks)
//   engine_sampled.cpp   a sampled trace's rules (Mode::kSampled)
//   summary_engine.cpp   the modes (sums, checks, top's live log, count) and the public API
// Internal to the engine: only those files include it.
#pragma once

#include <simdjson.h>

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/engine_checks.h"
#include "analysis/engine_event.h"
#include "analysis/engine_frontier.h"
#include "analysis/engine_sampled.h"
#include "analysis/ondemand_text.h"
#include "analysis/summary_engine.h"

namespace fqntrace::analysis {

namespace od = simdjson::ondemand;
namespace engine {
struct Plain;  // a plain line's value (engine_plain_line.cpp)
}
using namespace engine;  // the engine's own types, in every engine file

struct SummaryEngine::State {
  bool jsonl;
  od::parser parser;
  std::vector<char> buffer;  // a text copied with simdjson's padding after it
  Interner strings;          // fqns, names, module types, keys
  std::vector<uint8_t>
      name_kinds;  // string id -> its NameKind flags as an event's name; 0: not yet
  uint32_t question_mark;
  uint32_t addr_none;         // args.get("Addr") is None
  std::vector<Event> events;  // one parsed block
  std::string scratch;

  // Totals
  std::vector<ModuleSums> modules;
  std::vector<int32_t> module_of;  // string id -> index in modules, -1
  bool device_seen = false;

  // Frontier per thread
  std::vector<Thread> threads;
  std::unordered_map<uint32_t, uint32_t> thread_of;  // thread key string id -> index
  Pending scratch_pending;

  // Steps: per pid key, sorted (start, end, step)
  struct Range {
    int64_t start, end, step;
    bool operator<(const Range& o) const {
      return start != o.start ? start < o.start : end != o.end ? end < o.end : step < o.step;
    }
  };
  std::unordered_map<uint32_t, std::vector<Range>> ranges;
  bool per_step = false, ranges_sorted = false;
  std::vector<int64_t> step_numbers;  // slot - 1 -> step number
  std::unordered_map<int64_t, uint32_t> step_slot;
  std::unordered_map<uint64_t, int64_t> step_times[kPhases];  // (slot << 32 | fqn) -> ns
  std::unordered_map<uint64_t, int64_t> step_cpu[kPhases];    // the same for self CPU time
  bool cpu_seen = false;

  // Memory
  std::vector<MemoryNode> nodes;
  std::vector<int32_t> node_of;                                // string id -> node index, -1
  std::unordered_map<uint32_t, std::vector<uint32_t>> chains;  // fqn -> [self, parent, ...]
  std::unordered_map<uint64_t, Block> live;                    // (str(pid), Addr key) -> block
  int64_t seq = 0;
  bool memory_seen = false;

  // validate's checks (kChecks) instead of the sums; top's log (kLive)
  std::unique_ptr<Checks> checks;
  uint32_t global_fqn;
  uint32_t module_entry;  // "fqntrace_module": an entry of the trace's module table
  std::unordered_map<uint32_t, uint32_t> declared_type;  // fqn -> class, from the module table
  bool logging = false;                                  // kLive
  bool counting = false;                                 // kCount: slices only, no sums
  int64_t slices = 0;
  std::vector<LiveRecord> log;
  bool any_range = false;
  int64_t first_ns = 0, latest_ns = 0;

  // A sampled trace (kSampled): its probability, whether the backward spans carry the nodes'
  // time (header "sampleNodeSpans"), what each thread keeps, and the estimates' variance
  bool sampled = false;
  double sample_p = 1;
  bool node_spans = false;
  std::vector<SampledThread> sampled_threads;     // by thread index
  std::vector<uint32_t> sampled_order;            // threads, in the order they count
  std::unordered_map<uint64_t, double> variance;  // (phase << 32 | fqn) -> ns^2

  State(bool jsonl_, Mode mode) : jsonl(jsonl_) {
    question_mark = strings.id("?");
    addr_none = strings.id("n");
    global_fqn = strings.id("Global");
    module_entry = strings.id("fqntrace_module");
    if (mode == Mode::kChecks) checks = std::make_unique<Checks>();
    logging = mode == Mode::kLive;
    counting = mode == Mode::kCount;
    sampled = mode == Mode::kSampled;
  }

  // ---- parsing ---------------------------------------------------------------------------
  // An object's or array's items, validated and counted (Python's truth of it: items > 0).
  static bool skip_items(od::value v, od::json_type type, size_t& items);

  static bool skip(od::value v);

  // A number, or ok=false when the value is not one (validated either way). False: invalid.
  static bool number(od::value v, Number& out, bool& unsupported);

  // An exact int (type(x) is int); with_bool: isinstance(x, int), True and False too.
  static bool integer(od::value v, bool with_bool, bool& is_int, int64_t& out, bool& unsupported);

  // A value read once for the two spellings Python gives it (python_str, dict_key).
  struct Scalar {
    od::json_type type = od::json_type::null;
    std::string_view text;  // a string's text; a number's (or an array's, object's) raw token
    bool boolean = false;
    Number n;  // a number's value
  };

  // False: invalid, or (unsupported set) a number beyond 64 bits, whose text is still read.
  static bool scalar(od::value v, Scalar& out, bool& unsupported);

  // str(x) of a pid or tid: the string itself, Python's spelling of the rest.
  static void python_str(const Scalar& s, std::string& out);

 public:
  // A value as a Python dict key (1, 1.0 and True are one key; "1" another). Public to the
  // binding through pid_key_of().
  static std::string key_of_number(const Number& n, std::string_view raw);

  static void dict_key(const Scalar& s, std::string& out);

  // A dict key read from v. False: invalid, or unsupported (a number beyond 64 bits).
  static bool dict_key(od::value v, std::string& out, bool& unsupported);

  static bool truthy(od::value v, bool& out);

  // A string's interned id, or kNone when the value is not a string. False: invalid.
  bool string_id(od::value x, uint32_t& out);

  bool parse_args(od::value v, Event& e, bool& unsupported);

  // One event's text (a JSON object, nothing after it) into e. False: not one valid event.
  bool parse_event(const char* data, size_t size, size_t capacity, Event& e);

  // One event's object (a document of a line or of a block's stream) into e.
  template <class Doc>
  bool parse_doc(Doc& doc, Event& e);  // e: a new Event()

  // A pid's or tid's raw token: there and not null ("\x01": the key is missing).
  static bool present(const std::string& raw) { return raw != "\x01" && raw != "null"; }
  // A string or an integer: str() and the thread key agree with the raw token.
  static bool plain(const std::string& raw);

  // A flow's id: an int or a string as a key of its own; anything else is left to Python.
  bool flow_id(od::value x, Event& e, bool& unsupported);

  // The thread of the last event, by the raw text of its pid and tid.
  bool cache_valid = false;
  std::string cur_pid_raw, cur_tid_raw, cached_pid_raw, cached_tid_raw, cached_tid_text;
  uint32_t cached_thread = 0, cached_pid_str = 0, cached_pid_key = 0;

  void clear_args(Event& e) const;

  // ---- totals ----------------------------------------------------------------------------
  ModuleSums& module(uint32_t fqn, int64_t first_seen, bool& created);

  bool has_module(uint32_t fqn) const;

  // Totals.add_event: the counts of one valid slice (its CPU time among them); the phase sums an
  // op's self time goes to, or nullptr.
  PhaseSums* add_event(const Event& e, int64_t start, bool is_op);

  // A range's own CPU time (Totals.add_event): already without that of the measured ranges
  // inside it, so it counts as it comes.
  void add_cpu(const Event& e, ModuleSums& m, int64_t start);

  // ---- steps -----------------------------------------------------------------------------
  uint32_t step_of(uint32_t pid_key, int64_t start);
  uint32_t slot_of(int64_t step);  // a step's slot (1..), given in the order steps are seen
  struct StepCache {               // the range step_of found last
    bool valid = false;
    uint32_t pid_key = 0;
    const std::vector<Range>* ranges = nullptr;
    size_t index = 0;
    uint32_t slot = 0;
  } step_cache;

  // A frontier group's ops count. `when` (ns): the start of the range that holds them (theirs
  // when outermost), which lies in the step their starts lie in: top's live log gives them to it.
  void commit(Group& g, int64_t when);

  // ---- memory ----------------------------------------------------------------------------
  uint32_t node(uint32_t fqn);

  const std::vector<uint32_t>& chain(uint32_t fqn);

  void close_run(const Thread::Run& run);

  void memory_event(const Event& e);

  void module_end(const Event& e);

  // ---- one event (StreamSummary.add) -----------------------------------------------------
  bool in_file_order(const Event& e);  // Totals.add_in_file_order; false: an "M" record

  bool apply(const Event& e);
  template <class Put>
  void place(Thread& thread, const Event& e, int64_t start, int64_t end, Put put);

  long feed(const char* data, size_t size, bool block);

  // ---- a sampled trace (Mode::kSampled) ---------------------------------------------------
  bool apply_sampled(const Event& e);

  void sampled_time(uint32_t pid_key, uint32_t fqn, uint32_t phase, int64_t start, int64_t ns);

  SampledThread& sampled_thread(uint32_t thread);

  void settle_loose(SampledThread& t, bool all, int64_t start, int64_t end);

  void finish_sampled();

  // A block of event lines, read in place: each line by plain_line, or by simdjson_line when
  // plain_line does not take it.
  long feed_lines(const char* base, size_t total);
  bool simdjson_line(const char* p, const char* end);
  char* padded(const char* data, size_t size);  // a copy in buffer, padded for simdjson
  // ---- the plain-line path (engine_plain_line.cpp) ----------------------------------------
  // One line (from its first non-blank byte to its newline or `end`) into e, when it is an
  // object of plain values as the core writes them: keys and strings of printable ASCII
  // without escapes, numbers without exponents and few enough digits to convert exactly,
  // objects only under "args", each known key once. The line's end (its newline or `end`), or
  // nullptr: not such a line (e and the parse state untouched but for interned strings);
  // simdjson reads it.
  const char* plain_line(const char* p, const char* end, Event& e);
  // One of args' items (its key, engine_plain_line.cpp's ArgKey, and a plain value), as
  // parse_args reads it; seen: the keys read so far. False: simdjson's path (a known key twice,
  // a phase that is a number).
  bool plain_arg(uint8_t arg, const Plain& v, Event& e, uint32_t& seen);
  // args' object from just after its opening brace: past the closing one, or nullptr.
  const char* plain_args(const char* p, const char* end, Event& e);
  // The values parse_doc and plain_line read alike (engine_parse.cpp): one rule each.
  void ph_text(Event& e, std::string_view s);
  void name_text(Event& e, std::string_view s);
  void cat_text(Event& e, std::string_view s);
  void phase_text(Event& e, std::string_view s);
  void resolve_thread(Event& e, bool pid_parsed, bool tid_parsed, std::string& pid_text,
                      std::string& tid_text, std::string& pid_key);

  // A parsed block's events: the sums, or validate's checks.
  long consume();

  // ---- top's live view --------------------------------------------------------------------
  void seen(const Event& e, int64_t start, int64_t end);  // LiveSummary.seen

  void settle();  // StreamSummary.commit_pending(outermost_only=True)

  // ---- validate's checks (validate_rules._check_event, validate_stream._StreamChecks) ----
  // False: a problem, or something only the Python checks judge (checks->python).
  bool check_event(const Event& e);

  uint8_t& fqn_flags(uint32_t fqn);

  bool check_slice(const Event& e);

  bool check_flow(const Event& e);

  CheckResult check_result(bool incomplete) const;

  // An entry of the module table (docs/trace-format.md, *Module table*), well formed.
  bool is_module_entry(const Event& e) const;

  void finish();
};

}  // namespace fqntrace::analysis

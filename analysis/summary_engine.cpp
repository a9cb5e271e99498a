#include "analysis/summary_engine.h"
#include "analysis/ondemand_text.h"

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <map>
#include <unordered_set>

namespace fqntrace::analysis {
namespace {

namespace od = simdjson::ondemand;

constexpr int64_t kNestToleranceNs = 1;  // traceio.NEST_TOLERANCE_NS
constexpr std::string_view kEngineWrapper = "autograd::engine::evaluate_function:";
constexpr std::string_view kStepPrefix = "ProfilerStep#";             // top.STEP_PREFIX
constexpr std::string_view kCompiledRegion = "Torch-Compiled Region";  // traceio's compiled code
constexpr uint32_t kNone = 0xffffffffu;
// Phase keys: 0..2 the PHASES, 3 None (missing or null), 4.. any other value (interned).
constexpr uint32_t kPhaseNone = 3;

enum Cat : uint8_t { kCatOther, kCatCpuOp, kCatUserAnnotation, kCatDevice, kCatModuleSpan };

// Strings to dense ids; ids index a vector of the strings.
class Interner {
 public:
  uint32_t id(std::string_view s) {
    auto it = ids_.find(s);
    if (it != ids_.end()) return it->second;
    strings_.push_back(std::make_unique<std::string>(s));
    uint32_t id = static_cast<uint32_t>(strings_.size() - 1);
    ids_.emplace(std::string_view(*strings_.back()), id);
    return id;
  }
  const std::string& str(uint32_t id) const { return *strings_[id]; }
  size_t size() const { return strings_.size(); }

 private:
  std::unordered_map<std::string_view, uint32_t> ids_;
  std::vector<std::unique_ptr<std::string>> strings_;  // stable addresses for the views
};

// A JSON number as Python sees it: an int or a float (bool is not a number here).
struct Number {
  bool ok = false;
  bool is_int = false;
  int64_t i = 0;
  double d = 0;
  // round(x * 1000): Python's round() of a float is round-half-even, as nearbyint.
  int64_t ns() const { return is_int ? i * 1000 : static_cast<int64_t>(std::nearbyint(d * 1000.0)); }
  bool negative() const { return is_int ? i < 0 : d < 0; }
};

// What the summary reads from one event.
struct Event {
  char ph = 0;  // 'X', 'i' or 0 (anything else)
  uint8_t cat = kCatOther;
  bool name_is_str = false, name_is_memory = false, name_is_wrapper = false;
  uint32_t name = 0;  // interned; "?" when not a string (summarize._name)
  Number ts, dur;
  uint32_t thread = 0;   // (str(pid), str(tid))
  uint32_t pid_str = 0;  // str(pid)
  uint32_t pid_key = 0;  // pid as a dict key (step ranges)
  bool args = false;     // args is an object
  uint32_t fqn = kNone;  // args.fqn when a string
  uint32_t phase = kPhaseNone;
  bool has_depth = false;
  int64_t depth = 0;
  bool has_module_type = false;
  uint32_t module_type = kNone;  // when a string
  Number cpu;                    // args.self_cpu_ns (plugin/thread_cpu.h)
  bool async_work = false;       // truthy
  bool has_collective = false, has_fwd_thread = false;
  bool bytes_int = false, flops_int = false, size_int = false;
  int64_t bytes = 0, flops = 0, size = 0;
  uint32_t addr_key = 0;
  // What validate's checks read besides (State::checks only; see check_event)
  bool ph_str = false;                               // ph is a string
  bool name_is_step = false, name_is_compiled = false;  // ProfilerStep#, compiled code
  bool has_pid = false, has_tid = false;             // present and not null
  bool odd_thread = false;                           // a pid or tid neither an int nor a string
  uint8_t cat_kind = 0;                              // 0 missing or null, 1 a string, 2 other
  uint32_t cat_text = 0;                             // interned, when a string
  uint8_t id_kind = 0;                               // 0 missing or null, 1 int, 2 string, 3 other
  int64_t id_int = 0;
  uint32_t id_text = 0;                              // interned, when a string
};

struct Contrib {
  uint64_t key;  // name id << 32 | step slot (0: no step)
  int64_t ns, count;
};

// A small map with a hash index once it grows: most frontier groups hold one or two entries,
// the outermost ones (a whole step's ops) thousands.
template <class T>
class SmallMap {
 public:
  T* find(uint64_t key) {
    if (!index_.empty()) {
      auto it = index_.find(key);
      return it == index_.end() ? nullptr : &items_[it->second];
    }
    for (auto& item : items_)
      if (item.key == key) return &item;
    return nullptr;
  }
  T& add(T item) {
    items_.push_back(std::move(item));
    if (!index_.empty()) {
      index_.emplace(items_.back().key, items_.size() - 1);
    } else if (items_.size() > 16) {
      for (size_t k = 0; k < items_.size(); ++k) index_.emplace(items_[k].key, k);
    }
    return items_.back();
  }
  void clear() {
    items_.clear();
    index_.clear();
  }
  size_t size() const { return items_.size(); }
  std::vector<T>& items() { return items_; }

 private:
  std::vector<T> items_;
  std::unordered_map<uint64_t, size_t> index_;
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

void merge_groups(SmallMap<Group>& into, SmallMap<Group>& from) {
  if (from.size() > into.size()) std::swap(into, from);  // sums: the direction does not matter
  for (auto& g : from.items()) {
    Group* mine = into.find(g.key);
    if (mine == nullptr) {
      into.add(std::move(g));
      continue;
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
  from.clear();
}

// ---- validate's checks: what is kept while the events stream by ---------------------------
// The ranges of one thread whose enclosing range has not come yet (validate._StreamChecks).
struct CheckThread {
  struct Range {
    int64_t start, end;
    bool has_depth;
    int64_t depth;
  };
  std::vector<Range> stack;
  bool seen = false;
  int64_t last_end = 0;
};

// A flow: (cat, id) with the cat a string or missing (kNone), the id an int or a string.
struct FlowKey {
  uint32_t cat;
  bool is_int;
  int64_t id;  // the int, or the string's interned id
  bool operator==(const FlowKey& o) const {
    return cat == o.cat && is_int == o.is_int && id == o.id;
  }
};
struct FlowKeyHash {
  size_t operator()(const FlowKey& k) const {
    return std::hash<int64_t>()(k.id) * 31 + (size_t(k.cat) << 1) + k.is_int;
  }
};

// The flows that had both ends: the core numbers flows 1, 2, 3, ..., so the ints are kept as
// ranges of consecutive numbers (a handful), as validate._IdSet does.
class ClosedFlows {
 public:
  bool contains(const FlowKey& k) const {
    if (!k.is_int) return texts_.count(k) != 0;
    auto cat = ranges_.find(k.cat);
    if (cat == ranges_.end()) return false;
    auto it = cat->second.upper_bound(k.id);  // the first range starting after the id
    return it != cat->second.begin() && k.id <= std::prev(it)->second;
  }
  void add(const FlowKey& k) {
    if (!k.is_int) {
      texts_.insert(k);
      return;
    }
    auto& ranges = ranges_[k.cat];
    auto it = ranges.upper_bound(k.id);
    if (it != ranges.begin() && reaches(std::prev(it)->second, k.id)) {
      it = std::prev(it);
      it->second = std::max(it->second, k.id);
    } else {
      it = ranges.emplace(k.id, k.id).first;
    }
    auto next = std::next(it);
    if (next != ranges.end() && reaches(it->second, next->first)) {  // joins the next range
      it->second = std::max(it->second, next->second);
      ranges.erase(next);
    }
  }

 private:
  // Does a range ending at `end` reach `id` when extended by one? (no overflow at INT64_MAX)
  static bool reaches(int64_t end, int64_t id) {
    return id <= end || (end < INT64_MAX && id == end + 1);
  }

  std::unordered_map<uint32_t, std::map<int64_t, int64_t>> ranges_;  // cat -> start -> end
  std::unordered_set<FlowKey, FlowKeyHash> texts_;
};

struct Checks {
  std::vector<CheckThread> threads;  // by the engine's thread index
  int64_t n_threads = 0;
  enum : uint8_t { kSpan = 1, kFirstOp = 2 };
  std::vector<uint8_t> fqn_flags;  // string id -> kSpan | kFirstOp
  bool compiled = false;           // compiled code ran (docs/compile.md): Python judges spans
  std::unordered_map<FlowKey, std::pair<int64_t, int64_t>, FlowKeyHash> open;  // (s, f) counts
  ClosedFlows closed;
  bool python = false;  // a problem, or something only the Python checks judge
};

}  // namespace

struct SummaryEngine::State {
  bool jsonl;
  od::parser parser;
  std::vector<char> buffer;  // a block copied with simdjson's padding after it
  Interner strings;                // fqns, names, module types, keys
  uint32_t question_mark;
  uint32_t addr_none;  // args.get("Addr") is None
  std::vector<Event> events;       // one parsed block
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
  std::vector<int32_t> node_of;                 // string id -> node index, -1
  std::unordered_map<uint32_t, std::vector<uint32_t>> chains;  // fqn -> [self, parent, ...]
  std::unordered_map<uint64_t, Block> live;     // (str(pid), Addr key) -> block
  int64_t seq = 0;
  bool memory_seen = false;

  // validate's checks (kChecks) instead of the sums; top's log (kLive)
  std::unique_ptr<Checks> checks;
  uint32_t global_fqn;
  uint32_t module_entry;  // "fqntrace_module": an entry of the trace's module table
  std::unordered_map<uint32_t, uint32_t> declared_type;  // fqn -> class, from the module table
  bool logging = false;  // kLive
  bool counting = false;  // kCount: slices only, no sums
  int64_t slices = 0;
  std::vector<LiveRecord> log;
  bool any_range = false;
  int64_t first_ns = 0, latest_ns = 0;

  State(bool jsonl_, Mode mode) : jsonl(jsonl_) {
    question_mark = strings.id("?");
    addr_none = strings.id("n");
    global_fqn = strings.id("Global");
    module_entry = strings.id("fqntrace_module");
    if (mode == Mode::kChecks) checks = std::make_unique<Checks>();
    logging = mode == Mode::kLive;
    counting = mode == Mode::kCount;
  }

  // ---- parsing ---------------------------------------------------------------------------
  // An object's or array's items, validated and counted (Python's truth of it: items > 0).
  static bool skip_items(od::value v, od::json_type type, size_t& items) {
    items = 0;
    if (type == od::json_type::object) {
      od::object obj;
      if (v.get_object().get(obj)) return false;
      for (auto result : obj) {
        od::field field;
        if (std::move(result).get(field) || !skip(field.value())) return false;
        ++items;
      }
      return true;
    }
    od::array arr;
    if (v.get_array().get(arr)) return false;
    for (auto item : arr) {
      od::value x;
      if (item.get(x) || !skip(x)) return false;
      ++items;
    }
    return true;
  }

  static bool skip(od::value v) {
    od::json_type type;
    if (v.type().get(type)) return false;
    switch (type) {
      case od::json_type::object:
      case od::json_type::array: {
        size_t items;
        return skip_items(v, type, items);
      }
      case od::json_type::number: {
        od::number n;
        return !v.get_number().get(n);
      }
      case od::json_type::string: {
        od::raw_json_string s;  // stage 1 checked its quotes and UTF-8; no copy needed
        return !v.get_raw_json_string().get(s);
      }
      case od::json_type::boolean:
      case od::json_type::null:
        return valid_literal(v, type);
    }
    return false;
  }

  // A number, or ok=false when the value is not one (validated either way). False: invalid.
  static bool number(od::value v, Number& out, bool& unsupported) {
    od::json_type type;
    if (v.type().get(type)) return false;
    if (type != od::json_type::number) return skip(v);
    od::number n;
    if (v.get_number().get(n)) {
      unsupported = true;  // a big integer (beyond 64 bits), or not a number after all
      return false;
    }
    if (n.is_double()) {
      out.d = n.get_double();
      out.ok = true;
      out.is_int = false;
      return true;
    }
    if (n.is_int64()) {
      out.i = n.get_int64();
      out.ok = out.is_int = true;
      return true;
    }
    if (n.get_uint64() <= static_cast<uint64_t>(INT64_MAX)) {
      out.i = static_cast<int64_t>(n.get_uint64());
      out.ok = out.is_int = true;
      return true;
    }
    unsupported = true;  // a Python int beyond 64 bits: the Python path takes the file
    return false;
  }

  // An exact int (type(x) is int); with_bool: isinstance(x, int), True and False too.
  static bool integer(od::value v, bool with_bool, bool& is_int, int64_t& out, bool& unsupported) {
    od::json_type type;
    if (v.type().get(type)) return false;
    if (type == od::json_type::boolean) {
      bool b;
      if (v.get_bool().get(b)) return false;
      if (with_bool) {
        is_int = true;
        out = b ? 1 : 0;
      } else {
        is_int = false;
      }
      return true;
    }
    Number n;
    if (!number(v, n, unsupported)) return false;
    is_int = n.ok && n.is_int;
    out = n.i;
    return true;
  }

  // A value read once for the two spellings Python gives it (python_str, dict_key).
  struct Scalar {
    od::json_type type = od::json_type::null;
    std::string_view text;  // a string's text; a number's (or an array's, object's) raw token
    bool boolean = false;
    Number n;  // a number's value
  };

  // False: invalid, or (unsupported set) a number beyond 64 bits, whose text is still read.
  static bool scalar(od::value v, Scalar& out, bool& unsupported) {
    if (v.type().get(out.type)) return false;
    switch (out.type) {
      case od::json_type::string:
        return !v.get_string().get(out.text);
      case od::json_type::boolean:
        return !v.get_bool().get(out.boolean);
      case od::json_type::null: {
        bool is_null = false;
        return !v.is_null().get(is_null) && is_null;
      }
      case od::json_type::number:
        out.text = trimmed(v.raw_json_token());
        return number(v, out.n, unsupported);
      default:
        out.text = trimmed(v.raw_json_token());
        return skip(v);
    }
  }

  // str(x) of a pid or tid: the string itself, Python's spelling of the rest.
  static void python_str(const Scalar& s, std::string& out) {
    if (s.type == od::json_type::boolean) out = s.boolean ? "True" : "False";
    else if (s.type == od::json_type::null) out = "None";
    else out.assign(s.text);
  }

 public:
  // A value as a Python dict key (1, 1.0 and True are one key; "1" another). Public to the
  // binding through pid_key_of().
  static std::string key_of_number(const Number& n, std::string_view raw) {
    if (n.is_int) return "i" + std::to_string(n.i);
    if (std::isfinite(n.d) && n.d == std::floor(n.d) && std::fabs(n.d) < 9e15)
      return "i" + std::to_string(static_cast<int64_t>(n.d));
    return "f" + std::string(raw);
  }

  static void dict_key(const Scalar& s, std::string& out) {
    switch (s.type) {
      case od::json_type::string:
        out = "s";
        out.append(s.text);
        return;
      case od::json_type::boolean:
        out = s.boolean ? "i1" : "i0";
        return;
      case od::json_type::null:
        out = "n";
        return;
      case od::json_type::number:
        out = key_of_number(s.n, s.text);
        return;
      default:
        out = "o";  // unhashable in Python (the Python path would fail on it too)
    }
  }

  // A dict key read from v. False: invalid, or unsupported (a number beyond 64 bits).
  static bool dict_key(od::value v, std::string& out, bool& unsupported) {
    Scalar s;
    if (!scalar(v, s, unsupported)) return false;
    dict_key(s, out);
    return true;
  }

  static bool truthy(od::value v, bool& out) {
    od::json_type type;
    if (v.type().get(type)) return false;
    switch (type) {
      case od::json_type::boolean:
        return !v.get_bool().get(out);
      case od::json_type::null: {
        out = false;
        return skip(v);
      }
      case od::json_type::number: {
        double d;
        if (v.get_double().get(d)) return false;
        out = d != 0;
        return true;
      }
      case od::json_type::string: {
        std::string_view s;
        if (v.get_string().get(s)) return false;
        out = !s.empty();
        return true;
      }
      case od::json_type::array:
      case od::json_type::object: {
        size_t items;
        if (!skip_items(v, type, items)) return false;
        out = items > 0;
        return true;
      }
    }
    return false;
  }

  // A string's interned id, or kNone when the value is not a string. False: invalid.
  bool string_id(od::value x, uint32_t& out) {
    od::json_type type;
    if (x.type().get(type)) return false;
    if (type != od::json_type::string) {
      out = kNone;
      return skip(x);
    }
    std::string_view s;
    if (x.get_string().get(s)) return false;
    out = strings.id(s);
    return true;
  }

  bool parse_args(od::value v, Event& e, bool& unsupported) {
    od::object obj;
    if (v.get_object().get(obj)) return false;
    e.args = true;
    std::string key_string;
    for (auto result : obj) {
      od::field field;
      std::string_view key;
      if (std::move(result).get(field) || !key_text(field, key)) return false;
      od::value x = field.value();
      if (key == "fqn") {
        if (!string_id(x, e.fqn)) return false;
      } else if (key == "phase") {
        od::json_type type;
        if (x.type().get(type)) return false;
        if (type == od::json_type::string) {
          std::string_view s;
          if (x.get_string().get(s)) return false;
          if (s == "forward") e.phase = 0;
          else if (s == "backward") e.phase = 1;
          else if (s == "recompute") e.phase = 2;
          else e.phase = 4 + strings.id("s" + std::string(s));
        } else if (type == od::json_type::null) {
          e.phase = kPhaseNone;
          if (!skip(x)) return false;
        } else {
          if (!dict_key(x, key_string, unsupported)) return false;
          e.phase = 4 + strings.id(key_string);
        }
      } else if (key == "depth") {
        if (!integer(x, false, e.has_depth, e.depth, unsupported)) return false;
      } else if (key == "self_cpu_ns") {
        e.cpu = Number();
        if (!number(x, e.cpu, unsupported)) return false;
      } else if (key == "module_type") {
        e.has_module_type = true;
        if (!string_id(x, e.module_type)) return false;
      } else if (key == "async_work") {
        if (!truthy(x, e.async_work)) return false;
      } else if (key == "collective") {
        e.has_collective = true;
        if (!skip(x)) return false;
      } else if (key == "bytes") {
        if (!integer(x, true, e.bytes_int, e.bytes, unsupported)) return false;
      } else if (key == "flops") {
        if (!integer(x, true, e.flops_int, e.flops, unsupported)) return false;
      } else if (key == "Fwd thread id") {
        e.has_fwd_thread = true;
        if (!skip(x)) return false;
      } else if (key == "Addr") {
        if (!dict_key(x, key_string, unsupported)) return false;
        e.addr_key = strings.id(key_string);
      } else if (key == "Bytes") {
        if (!integer(x, false, e.size_int, e.size, unsupported)) return false;
      } else if (!skip(x)) {
        return false;
      }
    }
    return true;
  }

  // One event's text (a JSON object, nothing after it) into e. False: not one valid event.
  bool parse_event(const char* data, size_t size, size_t capacity, Event& e) {
    od::document doc;
    if (parser.iterate(data, size, capacity).get(doc) || !parse_doc(doc, e)) return false;
    const char* after;
    return doc.current_location().get(after) != simdjson::SUCCESS;  // nothing after the object
  }

  // One event's object (a document of a line or of a block's stream) into e.
  template <class Doc>
  bool parse_doc(Doc& doc, Event& e) {  // e: a new Event()
    e.name = question_mark;
    e.addr_key = addr_none;
    bool unsupported = false;
    od::object obj;
    if (doc.get_object().get(obj)) return false;
    std::string pid_text = "None", tid_text = "None", pid_key = "n";
    cur_pid_raw.assign("\x01");  // no pid: no raw token is this
    cur_tid_raw.assign("\x01");
    bool pid_parsed = false, tid_parsed = false;
    std::string text;
    for (auto result : obj) {
      od::field field;
      std::string_view key;
      if (std::move(result).get(field) || !key_text(field, key)) return false;
      od::value x = field.value();
      if (key == "ph") {
        od::json_type type;
        if (x.type().get(type)) return false;
        e.ph = 0;
        if (type == od::json_type::string) {
          std::string_view s;
          if (x.get_string().get(s)) return false;
          e.ph_str = true;
          if (s.size() == 1 && (s[0] == 'X' || s[0] == 'i' || s[0] == 's' || s[0] == 'f' ||
                                s[0] == 'M'))
            e.ph = s[0];
          else if (s == "footer") e.ph = 'F';  // a JSON Lines footer is no event
        } else if (!skip(x)) {
          return false;
        } else {
          e.ph_str = false;
        }
      } else if (key == "name") {
        od::json_type type;
        if (x.type().get(type)) return false;
        if (type == od::json_type::string) {
          std::string_view s;
          if (x.get_string().get(s)) return false;
          e.name = strings.id(s);
          e.name_is_str = true;
          e.name_is_memory = s == "[memory]";
          e.name_is_wrapper = s.substr(0, kEngineWrapper.size()) == kEngineWrapper;
          e.name_is_step = s.substr(0, kStepPrefix.size()) == kStepPrefix;
          e.name_is_compiled = s == "CompiledFunction" || s == "CompiledFunctionBackward" ||
                               s.substr(0, kCompiledRegion.size()) == kCompiledRegion;
        } else {
          e.name = question_mark;
          e.name_is_str = e.name_is_memory = e.name_is_wrapper = false;
          e.name_is_step = e.name_is_compiled = false;
          if (!skip(x)) return false;
        }
      } else if (key == "cat") {
        od::json_type type;
        if (x.type().get(type)) return false;
        e.cat = kCatOther;
        e.cat_kind = type == od::json_type::string ? 1 : type == od::json_type::null ? 0 : 2;
        if (type == od::json_type::string) {
          std::string_view s;
          if (x.get_string().get(s)) return false;
          if (checks != nullptr) e.cat_text = strings.id(s);  // a flow's key
          if (s == "cpu_op") e.cat = kCatCpuOp;
          else if (s == "user_annotation") e.cat = kCatUserAnnotation;
          else if (s == "kernel" || s == "gpu_memcpy" || s == "gpu_memset") e.cat = kCatDevice;
          else if (s == "module_span") e.cat = kCatModuleSpan;
        } else if (!skip(x)) {
          return false;
        }
      } else if (key == "ts") {
        e.ts = Number();
        if (!number(x, e.ts, unsupported)) return false;
      } else if (key == "dur") {
        e.dur = Number();
        if (!number(x, e.dur, unsupported)) return false;
      } else if (key == "pid") {
        cur_pid_raw.assign(trimmed(x.raw_json_token()));
        if (cache_valid && cur_pid_raw == cached_pid_raw) {
          if (!skip(x)) return false;  // the same pid as the last event: its texts are known
          continue;
        }
        pid_parsed = true;
        Scalar value;  // str(pid) and pid as a dict key, from one read of the value
        if (!scalar(x, value, unsupported)) return false;
        python_str(value, pid_text);
        dict_key(value, pid_key);
      } else if (key == "tid") {
        cur_tid_raw.assign(trimmed(x.raw_json_token()));
        if (cache_valid && cur_tid_raw == cached_tid_raw) {
          if (!skip(x)) return false;
          continue;
        }
        tid_parsed = true;
        Scalar value;
        bool big = false;  // a tid beyond 64 bits is still a tid: str() spells it as written
        if (!scalar(x, value, big) && !big) return false;
        python_str(value, tid_text);
      } else if (key == "id" && checks != nullptr) {
        if (!flow_id(x, e, unsupported)) return false;
      } else if (key == "args") {
        od::json_type type;
        if (x.type().get(type)) return false;
        clear_args(e);  // a repeated key: the last one counts, as in Python
        if (type == od::json_type::object) {
          if (!parse_args(x, e, unsupported)) return false;
        } else if (!skip(x)) {
          return false;
        }
      } else if (!skip(x)) {
        return false;
      }
    }
    if (unsupported) return false;
    if (checks != nullptr) {
      e.has_pid = present(cur_pid_raw);
      e.has_tid = present(cur_tid_raw);
      e.odd_thread = (e.has_pid && !plain(cur_pid_raw)) || (e.has_tid && !plain(cur_tid_raw));
    }
    if (cache_valid && cur_pid_raw == cached_pid_raw && cur_tid_raw == cached_tid_raw) {
      e.thread = cached_thread;  // most events are on the thread of the event before
      e.pid_str = cached_pid_str;
      e.pid_key = cached_pid_key;
      return true;
    }
    // One of the two is the last event's: its texts come from the cache.
    if (!pid_parsed && cache_valid && cur_pid_raw == cached_pid_raw) {
      pid_text = strings.str(cached_pid_str);
      pid_key = strings.str(cached_pid_key);
    }
    if (!tid_parsed && cache_valid && cur_tid_raw == cached_tid_raw) tid_text = cached_tid_text;
    text = pid_text;
    text.push_back('\x1f');
    text += tid_text;
    uint32_t thread_key = strings.id(text);
    auto it = thread_of.find(thread_key);
    if (it == thread_of.end()) {
      it = thread_of.emplace(thread_key, static_cast<uint32_t>(threads.size())).first;
      threads.emplace_back();
    }
    e.thread = it->second;
    e.pid_str = strings.id(pid_text);
    e.pid_key = strings.id(pid_key);
    cache_valid = true;
    cached_pid_raw = cur_pid_raw;
    cached_tid_raw = cur_tid_raw;
    cached_tid_text = tid_text;
    cached_thread = e.thread;
    cached_pid_str = e.pid_str;
    cached_pid_key = e.pid_key;
    return true;
  }

  // A pid's or tid's raw token: there and not null ("\x01": the key is missing).
  static bool present(const std::string& raw) { return raw != "\x01" && raw != "null"; }
  // A string or an integer: str() and the thread key agree with the raw token.
  static bool plain(const std::string& raw) {
    if (!raw.empty() && raw[0] == '"') return true;
    for (char c : raw)
      if (!(c == '-' || (c >= '0' && c <= '9'))) return false;
    return !raw.empty();
  }

  // A flow's id: an int or a string as a key of its own; anything else is left to Python.
  bool flow_id(od::value x, Event& e, bool& unsupported) {
    Scalar s;
    if (!scalar(x, s, unsupported)) return false;
    if (s.type == od::json_type::null) {
      e.id_kind = 0;
    } else if (s.type == od::json_type::number && s.n.is_int) {
      e.id_kind = 1;
      e.id_int = s.n.i;
    } else if (s.type == od::json_type::string) {
      e.id_kind = 2;
      e.id_text = strings.id(s.text);
    } else {
      e.id_kind = 3;
    }
    return true;
  }

  // The thread of the last event, by the raw text of its pid and tid.
  bool cache_valid = false;
  std::string cur_pid_raw, cur_tid_raw, cached_pid_raw, cached_tid_raw, cached_tid_text;
  uint32_t cached_thread = 0, cached_pid_str = 0, cached_pid_key = 0;

  void clear_args(Event& e) const {
    e.args = false;
    e.fqn = kNone;
    e.phase = kPhaseNone;
    e.has_depth = e.has_module_type = e.async_work = e.has_collective = e.has_fwd_thread = false;
    e.cpu = Number();
    e.depth = 0;
    e.module_type = kNone;
    e.bytes_int = e.flops_int = e.size_int = false;
    e.bytes = e.flops = e.size = 0;
    e.addr_key = addr_none;
  }

  // ---- totals ----------------------------------------------------------------------------
  ModuleSums& module(uint32_t fqn, int64_t first_seen, bool& created) {
    if (module_of.size() <= fqn) module_of.resize(strings.size() + 1, -1);
    int32_t& index = module_of[fqn];
    created = index < 0;
    if (created) {
      index = static_cast<int32_t>(modules.size());
      modules.emplace_back();
      modules.back().fqn = fqn;
      modules.back().first_seen = first_seen;
    }
    return modules[index];
  }

  bool has_module(uint32_t fqn) const {
    return fqn < module_of.size() && module_of[fqn] >= 0;
  }

  // _Totals.add_event: the phase sums an op's self time goes to, or nullptr.
  PhaseSums* add_event(const Event& e, int64_t start, bool is_op) {
    bool created;
    ModuleSums& m = module(e.fqn, start, created);
    if (!created && start < m.first_seen) m.first_seen = start;
    bool known_phase = e.phase < kPhases;
    if (!is_op && e.cat == kCatDevice) {
      if (known_phase) {
        m.phases[e.phase].device_ns += e.dur.ns();
        device_seen = true;
      }
      return nullptr;
    }
    if (!is_op && e.cat == kCatUserAnnotation && e.has_module_type) {
      if (m.module_type.empty() && e.module_type != kNone) m.module_type = strings.str(e.module_type);
      if (e.phase == 0) m.calls += 1;
      return nullptr;
    }
    if (known_phase && e.async_work) {
      m.phases[e.phase].comm_ns += e.dur.ns();
      return nullptr;
    }
    if (!known_phase || !is_op) return nullptr;
    PhaseSums& p = m.phases[e.phase];
    if (e.has_collective) {
      p.collectives += 1;
      if (e.bytes_int) p.comm_bytes += e.bytes;
    } else if (e.flops_int) {
      p.self_flops += e.flops;
    }
    if (!e.has_fwd_thread && !e.name_is_wrapper) p.self_ops += 1;
    return &p;
  }

  // A range's own CPU time (_Totals.add_event): already without that of the measured ranges
  // inside it, so it counts as it comes.
  void add_cpu(const Event& e, int64_t start) {
    int64_t ns = e.cpu.is_int ? e.cpu.i : static_cast<int64_t>(std::nearbyint(e.cpu.d));
    modules[module_of[e.fqn]].phases[e.phase].cpu_ns += ns;
    cpu_seen = true;
    if (logging) log.push_back({LiveRecord::kCpu, uint8_t(e.phase), e.fqn, start, ns});
    uint32_t slot = per_step ? step_of(e.pid_key, start) : 0;
    if (slot != 0) step_cpu[e.phase][(uint64_t(slot) << 32) | e.fqn] += ns;
  }

  // ---- steps -----------------------------------------------------------------------------
  uint32_t step_of(uint32_t pid_key, int64_t start) {
    auto it = ranges.find(pid_key);
    if (it == ranges.end() || it->second.empty()) return 0;
    const auto& rs = it->second;
    auto after = std::upper_bound(rs.begin(), rs.end(), start,
                                  [](int64_t t, const Range& r) { return t < r.start; });
    if (after == rs.begin()) return 0;
    const Range& r = *(after - 1);
    if (!(start < r.end)) return 0;
    auto slot = step_slot.find(r.step);
    if (slot == step_slot.end()) {
      step_numbers.push_back(r.step);
      slot = step_slot.emplace(r.step, static_cast<uint32_t>(step_numbers.size())).first;
    }
    return slot->second;
  }

  // A frontier group's ops count. `when` (ns): the start of the range that holds them (theirs
  // when outermost), which lies in the step their starts lie in: top's live log gives them to it.
  void commit(Group& g, int64_t when) {
    if (g.contribs.size() == 0) return;
    uint32_t fqn = static_cast<uint32_t>(g.key);
    int phase = static_cast<int>(g.key >> 32);  // contributions exist only in PHASES
    PhaseSums& p = modules[module_of[fqn]].phases[phase];
    if (logging) {
      int64_t ns = 0;
      for (auto& c : g.contribs.items()) ns += c.ns;
      if (ns != 0) log.push_back({LiveRecord::kCounted, uint8_t(phase), fqn, when, ns});
    }
    for (auto& c : g.contribs.items()) {
      uint32_t name = static_cast<uint32_t>(c.key >> 32);
      uint32_t slot = static_cast<uint32_t>(c.key);
      p.self_ns += c.ns;
      auto& top = p.top[name];
      top.first += c.ns;
      top.second += c.count;
      if (per_step && slot != 0) step_times[phase][(uint64_t(slot) << 32) | fqn] += c.ns;
    }
  }

  // ---- memory ----------------------------------------------------------------------------
  uint32_t node(uint32_t fqn) {
    if (node_of.size() <= fqn) node_of.resize(strings.size() + 1, -1);
    int32_t& index = node_of[fqn];
    if (index < 0) {
      index = static_cast<int32_t>(nodes.size());
      nodes.emplace_back();
      nodes.back().fqn = fqn;
    }
    return static_cast<uint32_t>(index);
  }

  const std::vector<uint32_t>& chain(uint32_t fqn) {
    auto it = chains.find(fqn);
    if (it != chains.end()) return it->second;
    std::vector<uint32_t> out{node(fqn)};
    std::string text = strings.str(fqn);
    for (size_t dot = text.rfind('.'); dot != std::string::npos && dot > 0;
         dot = text.rfind('.', dot - 1)) {
      out.push_back(node(strings.id(text.substr(0, dot))));
      if (dot == 0) break;
    }
    return chains.emplace(fqn, std::move(out)).first->second;
  }

  void close_run(const Thread::Run& run) {
    int64_t& peak = nodes[run.node].numbers[run.phase][2];
    peak = std::max(peak, run.peak);
  }

  void memory_event(const Event& e) {
    if (e.fqn != kNone && !has_module(e.fqn)) {
      bool created;
      module(e.fqn, e.ts.ok ? e.ts.ns() : 0, created);
    }
    if (e.fqn == kNone || e.phase >= kPhases || !e.size_int) return;
    memory_seen = true;
    int phase = static_cast<int>(e.phase);
    const std::vector<uint32_t> links = chain(e.fqn);
    auto& runs = threads[e.thread].runs;
    auto in_chain = [&](uint32_t n) { return std::find(links.begin(), links.end(), n) != links.end(); };
    size_t kept = 0;
    for (auto& run : runs) {
      if (run.phase != phase || !in_chain(run.node)) close_run(run);
      else runs[kept++] = run;
    }
    runs.resize(kept);
    for (uint32_t n : links) {
      bool has = false;
      for (auto& run : runs) has = has || run.node == n;
      if (!has) runs.push_back({n, phase, seq, 0, 0});
    }
    int64_t* own = nodes[links[0]].numbers[phase];
    uint64_t live_key = (uint64_t(e.pid_str) << 32) | e.addr_key;
    if (e.size > 0) {
      own[0] += e.size;
      for (auto& run : runs) {
        run.live += e.size;
        run.peak = std::max(run.peak, run.live);
      }
      live[live_key] = Block{e.size, seq, e.thread, links[0], phase};
    } else if (e.size < 0) {
      own[1] += -e.size;
      auto it = live.find(live_key);
      if (it != live.end()) {
        Block b = it->second;
        live.erase(it);
        for (auto& run : runs)
          if (b.thread == e.thread && b.seq >= run.start_seq) run.live -= b.size;
        if (phase == 1 && b.phase != 1) nodes[b.node].numbers[b.phase][3] += b.size;
        if (phase != 1 && b.phase == 1) nodes[b.node].numbers[b.phase][4] += b.size;
      }
    }
    seq += 1;
  }

  void module_end(const Event& e) {
    if (e.fqn == kNone || e.fqn >= node_of.size() || node_of[e.fqn] < 0) return;
    auto& runs = threads[e.thread].runs;
    if (runs.empty()) return;
    uint32_t n = static_cast<uint32_t>(node_of[e.fqn]);
    size_t kept = 0;
    for (auto& run : runs) {
      if (run.node == n && static_cast<uint32_t>(run.phase) == e.phase) close_run(run);
      else runs[kept++] = run;
    }
    runs.resize(kept);
  }

  // ---- one event (StreamSummary.add) -----------------------------------------------------
  bool apply(const Event& e) {
    if (e.cat == kCatModuleSpan) return true;  // the module track: a view, never counted
    if (e.ph == 'M') {
      if (is_module_entry(e)) declared_type[e.fqn] = e.module_type;
      return true;
    }
    if (e.ph == 'i' && e.name_is_memory && e.args) memory_event(e);
    else if (e.ph == 'X' && e.args && e.has_module_type) module_end(e);
    if (e.ph != 'X' || !e.args || e.fqn == kNone || !e.ts.ok || !e.dur.ok || e.dur.negative())
      return true;
    int64_t start = e.ts.ns();
    int64_t end = start + e.dur.ns();
    if (logging) seen(e, start, end);
    bool is_op = e.cat == kCatCpuOp;
    PhaseSums* p = add_event(e, start, is_op);
    if (e.cpu.ok && !e.cpu.negative() && e.phase < kPhases) add_cpu(e, start);
    Thread& thread = threads[e.thread];
    if (!thread.seen) {
      thread.seen = true;
      thread.last_end = end;
    } else if (end < thread.last_end - kNestToleranceNs) {
      return false;
    } else {
      thread.last_end = std::max(thread.last_end, end);
    }
    // The pending subtrees this range encloses: the top of the stack from k.
    size_t k = thread.size;
    while (k > 0) {
      Pending& c = thread.stack[k - 1];
      if (c.start < start || c.end > end + kNestToleranceNs || !(c.start < end || c.start == start))
        break;
      if (c.start == start && c.end == end && e.has_depth && c.has_depth && c.depth < e.depth)
        return false;  // an outer range written before its inner one
      --k;
    }
    Pending& fresh = scratch_pending;
    fresh.groups.clear();
    if (is_op) {
      uint64_t owner = (uint64_t(e.phase) << 32) | e.fqn;
      int64_t excluded = 0;
      for (size_t j = k; j < thread.size; ++j) {
        for (auto& g : thread.stack[j].groups.items()) {
          if (g.key != owner) {
            excluded += g.dur;
            commit(g, start);
          } else {
            excluded += g.excluded;
          }
        }
      }
      Group g;
      g.key = owner;
      g.dur = end - start;
      g.excluded = excluded;
      if (p != nullptr) {
        uint32_t slot = per_step ? step_of(e.pid_key, start) : 0;
        g.contribs.add(Contrib{(uint64_t(e.name) << 32) | slot,
                               std::max<int64_t>(end - start - excluded, 0), 1});
      }
      fresh.groups.add(std::move(g));
    } else {
      for (size_t j = k; j < thread.size; ++j) merge_groups(fresh.groups, thread.stack[j].groups);
    }
    for (size_t j = k; j < thread.size; ++j) thread.stack[j].groups.clear();
    thread.size = k;
    bool sibling = k > 0 && e.has_depth && thread.stack[k - 1].has_depth &&
                   thread.stack[k - 1].depth == e.depth;
    if (sibling && logging && e.depth == 0) {
      // Live: an outermost sibling is final (settle() would count it now); counting it before
      // this one comes keeps each outermost range's time at its own start, so top can give it
      // to its step. Merged, a second's worth of steps would count as one.
      Pending& below = thread.stack[k - 1];
      for (auto& g : below.groups.items()) commit(g, below.start);
      below.groups.clear();
      std::swap(below.groups, fresh.groups);
      below.start = start;
      below.end = end;
    } else if (sibling) {
      Pending& below = thread.stack[k - 1];  // a sibling: every range enclosing one encloses the other
      merge_groups(below.groups, fresh.groups);
      below.end = std::max(below.end, end);
    } else {
      if (thread.stack.size() <= k) thread.stack.emplace_back();
      Pending& slot = thread.stack[k];
      slot.start = start;
      slot.end = end;
      slot.has_depth = e.has_depth;
      slot.depth = e.depth;
      std::swap(slot.groups, fresh.groups);
      thread.size = k + 1;
    }
    return true;
  }

  long feed(const char* data, size_t size, bool block) {
    if (!ranges_sorted) {
      for (auto& [pid, rs] : ranges) std::sort(rs.begin(), rs.end());
      ranges_sorted = true;
    }
    if (buffer.size() < size + simdjson::SIMDJSON_PADDING)
      buffer.resize(size + simdjson::SIMDJSON_PADDING);
    std::memcpy(buffer.data(), data, size);  // simdjson reads past the end: padding
    std::memset(buffer.data() + size, 0, simdjson::SIMDJSON_PADDING);
    const char* base = buffer.data();
    size_t total = size;
    size_t capacity_end = total + simdjson::SIMDJSON_PADDING;
    events.clear();
    if (block) return feed_lines(buffer.data(), size);
    size_t pos = 0;
    while (pos < total) {
      size_t newline = block ? std::string_view(base + pos, total - pos).find('\n') : std::string_view::npos;
      size_t stop = newline == std::string_view::npos ? total : pos + newline;
      size_t a = pos, b = stop;
      while (a < b && (base[a] == ' ' || base[a] == '\t' || base[a] == '\r')) ++a;
      while (b > a && (base[b - 1] == ' ' || base[b - 1] == '\t' || base[b - 1] == '\r')) --b;
      if (!jsonl && b > a && base[b - 1] == ',') {
        --b;  // a Chrome line's separator
        while (b > a && (base[b - 1] == ' ' || base[b - 1] == '\t')) --b;
      }
      pos = stop + 1;
      if (a == b) continue;  // a blank line
      if (base[a] != '{') return kInvalid;
      events.emplace_back();
      if (!parse_event(base + a, b - a, capacity_end - a, events.back())) return kInvalid;
      if (jsonl && events.back().ph == 'F') return kInvalid;  // the reader reads the footer
    }
    return consume();
  }

  // A block of event lines: the line ends' commas (Chrome) blanked, then one stage 1 over the
  // whole block (iterate_many), the events one document each.
  long feed_lines(char* base, size_t total) {
    size_t pos = 0;
    while (pos < total) {
      const void* nl = std::memchr(base + pos, '\n', total - pos);
      size_t stop = nl == nullptr ? total : static_cast<size_t>(static_cast<const char*>(nl) - base);
      size_t b = stop;
      while (b > pos && (base[b - 1] == ' ' || base[b - 1] == '\t' || base[b - 1] == '\r')) --b;
      if (!jsonl && b > pos && base[b - 1] == ',') base[b - 1] = ' ';  // a Chrome line's separator
      pos = stop + 1;
    }
    od::document_stream stream;
    if (parser.iterate_many(base, total, std::max<size_t>(total, 1 << 16)).get(stream))
      return kInvalid;
    for (auto it = stream.begin(); it != stream.end(); ++it) {
      od::document_reference doc;
      if ((*it).get(doc)) return kInvalid;
      events.emplace_back();
      if (!parse_doc(doc, events.back())) return kInvalid;
      if (jsonl && events.back().ph == 'F') return kInvalid;  // the reader reads the footer
    }
    if (stream.truncated_bytes() != 0) return kInvalid;
    return consume();
  }

  // A parsed block's events: the sums, or validate's checks.
  long consume() {
    if (counting) {
      for (const Event& e : events) slices += e.ph == 'X';
      return static_cast<long>(events.size());
    }
    for (const Event& e : events) {
      if (checks != nullptr) {
        if (!check_event(e)) return kProblem;
      } else if (!apply(e)) {
        return kNotPostOrder;
      }
    }
    return static_cast<long>(events.size());
  }

  // ---- top's live view --------------------------------------------------------------------
  void seen(const Event& e, int64_t start, int64_t end) {  // LiveSummary.seen
    if (!any_range || end > latest_ns) latest_ns = end;
    if (!any_range || start < first_ns) first_ns = start;
    any_range = true;
    if (e.name_is_step)
      log.push_back({LiveRecord::kStep, uint8_t(e.cat == kCatUserAnnotation), e.name, start, end});
  }

  void settle() {  // StreamSummary.commit_pending(outermost_only=True)
    for (auto& thread : threads) {
      size_t kept = 0;
      for (size_t j = 0; j < thread.size; ++j) {
        Pending& pending = thread.stack[j];
        if (!(pending.has_depth && pending.depth == 0)) {
          if (kept != j) std::swap(thread.stack[kept], pending);
          ++kept;
          continue;
        }
        for (auto& g : pending.groups.items()) commit(g, pending.start);
        pending.groups.clear();
      }
      thread.size = kept;
    }
  }

  // ---- validate's checks (validate._check_event and _StreamChecks) -----------------------
  // False: a problem, or something only the Python checks judge (checks->python).
  bool check_event(const Event& e) {
    Checks& c = *checks;
    bool ok = e.ph_str && !e.odd_thread;
    if (ok && e.ph == 'X') {
      ok = e.name_is_str && e.ts.ok && e.dur.ok && !e.dur.negative() && e.has_pid && e.has_tid;
      if (ok && (e.cat == kCatCpuOp || e.cat == kCatUserAnnotation || e.cat == kCatModuleSpan))
        ok = e.args && e.fqn != kNone && !strings.str(e.fqn).empty() && e.phase < kPhases &&
             !(e.has_module_type && e.module_type == kNone);
      ok = ok && check_slice(e);
    } else if (ok && (e.ph == 's' || e.ph == 'f')) {
      ok = e.id_kind != 0 && e.ts.ok && e.has_pid && e.has_tid && check_flow(e);
    } else if (ok && e.ph == 'M') {
      ok = e.name_is_str;
      if (ok && e.name == module_entry) {
        ok = is_module_entry(e);
        if (ok) fqn_flags(e.fqn) |= Checks::kSpan;  // a module the trace knows, like a span
      }
    }
    if (!ok) c.python = true;
    return ok;
  }

  uint8_t& fqn_flags(uint32_t fqn) {
    auto& flags = checks->fqn_flags;
    if (flags.size() <= fqn) flags.resize(strings.size() + 1, 0);
    return flags[fqn];
  }

  bool check_slice(const Event& e) {
    Checks& c = *checks;
    int64_t start = e.ts.ns();
    int64_t end = start + e.dur.ns();
    if (e.cat == kCatCpuOp) {
      uint8_t& flags = fqn_flags(e.fqn);
      if (flags == 0 && e.fqn != global_fqn) flags = Checks::kFirstOp;  // before any span of it
    } else if (e.cat == kCatUserAnnotation && e.args && e.has_module_type && e.fqn != kNone) {
      fqn_flags(e.fqn) |= Checks::kSpan;  // traceio.module_span_fqn
    }
    if (e.name_is_compiled) c.compiled = true;
    if (e.cat == kCatModuleSpan) return true;  // the module track's view: not in end order
    if (c.threads.size() <= e.thread) c.threads.resize(e.thread + 1);
    CheckThread& thread = c.threads[e.thread];
    if (!thread.seen) {
      thread.seen = true;
      thread.last_end = end;
      ++c.n_threads;
    } else if (end < thread.last_end - kNestToleranceNs) {
      return false;  // not in end order: the Python checks load the file whole
    } else if (end > thread.last_end) {
      thread.last_end = end;
    }
    auto& stack = thread.stack;
    while (!stack.empty()) {  // the pending ranges this one encloses (traceio.nest's rule)
      const auto& top = stack.back();
      if (top.start < start || top.end > end + kNestToleranceNs ||
          !(top.start < end || top.start == start))
        break;
      if (top.has_depth && e.has_depth && top.depth != e.depth + 1)
        return false;  // args.depth is not the nesting
      stack.pop_back();
    }
    if (!stack.empty()) {
      auto& top = stack.back();
      if (start < top.end - kNestToleranceNs && end > top.end + kNestToleranceNs)
        return false;  // overlap without nesting
      if (e.has_depth && top.has_depth && top.depth == e.depth) {  // a sibling
        top.end = std::max(top.end, end);
        return true;
      }
    }
    stack.push_back({start, end, e.has_depth, e.depth});
    return true;
  }

  bool check_flow(const Event& e) {
    if (e.cat_kind == 2 || e.id_kind == 3) return false;  // keys only json.dumps spells
    Checks& c = *checks;
    FlowKey key{e.cat_kind == 1 ? e.cat_text : kNone, e.id_kind == 1,
                e.id_kind == 1 ? e.id_int : int64_t(e.id_text)};
    auto it = c.open.find(key);
    if (it == c.open.end()) {
      if (c.closed.contains(key)) return false;  // a flow seen again after both its ends
      it = c.open.emplace(key, std::pair<int64_t, int64_t>(0, 0)).first;
    }
    (e.ph == 's' ? it->second.first : it->second.second) += 1;
    if (it->second.first == 1 && it->second.second == 1) {
      c.open.erase(it);
      c.closed.add(key);
    }
    return true;
  }

  CheckResult check_result(bool incomplete) const {
    CheckResult r;
    const Checks& c = *checks;
    if (c.python) return r;
    for (const auto& [key, counts] : c.open) {
      if (counts.first + counts.second != 1) return r;  // a flow with too many ends
      ++r.loose_flows;
    }
    for (uint8_t flags : c.fqn_flags) r.missing_fqns += flags == Checks::kFirstOp;
    if (!incomplete && (r.loose_flows != 0 || r.missing_fqns != 0)) return r;
    if (r.missing_fqns != 0 && c.compiled) return r;  // compiled code may name them
    r.judged = true;
    r.threads = c.n_threads;
    return r;
  }

  // An entry of the module table (docs/trace-format.md, *Module table*), well formed.
  bool is_module_entry(const Event& e) const {
    return e.name == module_entry && e.name_is_str && e.args && e.fqn != kNone &&
           !strings.str(e.fqn).empty() && e.has_module_type && e.module_type != kNone;
  }

  void finish() {
    for (auto& thread : threads) {
      for (size_t j = 0; j < thread.size; ++j)
        for (auto& g : thread.stack[j].groups.items()) commit(g, thread.stack[j].start);
      thread.size = 0;
      for (auto& run : thread.runs) close_run(run);
      thread.runs.clear();
    }
    for (auto& n : nodes) n.live_grad = 0;
    for (auto& [key, b] : live)
      if (b.phase == 1) nodes[b.node].live_grad += b.size;
  }
};

SummaryEngine::SummaryEngine(bool jsonl, Mode mode)
    : state_(std::make_unique<State>(jsonl, mode)) {}
SummaryEngine::~SummaryEngine() = default;

void SummaryEngine::add_step_range(const std::string& pid_key, int64_t start, int64_t end,
                                   int64_t step) {
  state_->ranges[state_->strings.id(pid_key)].push_back({start, end, step});
  state_->per_step = true;
  state_->ranges_sorted = false;
}

long SummaryEngine::feed_block(const char* data, size_t size) { return state_->feed(data, size, true); }

long SummaryEngine::feed_event(const char* data, size_t size) {
  return state_->feed(data, size, false);
}

void SummaryEngine::finish() { state_->finish(); }
const std::vector<ModuleSums>& SummaryEngine::modules() const { return state_->modules; }
const std::vector<MemoryNode>& SummaryEngine::memory_nodes() const { return state_->nodes; }
bool SummaryEngine::memory_seen() const { return state_->memory_seen; }
bool SummaryEngine::device_seen() const { return state_->device_seen; }
const std::string& SummaryEngine::fqn(uint32_t id) const { return state_->strings.str(id); }
std::vector<std::pair<uint32_t, uint32_t>> SummaryEngine::declared_types() const {
  return {state_->declared_type.begin(), state_->declared_type.end()};
}
const std::string& SummaryEngine::name(uint32_t id) const { return state_->strings.str(id); }

void SummaryEngine::for_each_step_time(void (*visit)(void*, int64_t, uint32_t, int, int64_t),
                                       void* ctx, bool cpu) const {
  for (int phase = 0; phase < kPhases; ++phase)
    for (auto& [key, ns] : (cpu ? state_->step_cpu : state_->step_times)[phase])
      visit(ctx, state_->step_numbers[(key >> 32) - 1], static_cast<uint32_t>(key), phase, ns);
}

bool SummaryEngine::cpu_seen() const { return state_->cpu_seen; }

int64_t SummaryEngine::slices() const { return state_->slices; }

CheckResult SummaryEngine::check_result(bool incomplete) const {
  if (state_->checks == nullptr) return CheckResult();
  return state_->check_result(incomplete);
}

void SummaryEngine::settle() { state_->settle(); }

std::vector<LiveRecord> SummaryEngine::take_log() {
  std::vector<LiveRecord> out;
  out.swap(state_->log);
  return out;
}

bool SummaryEngine::live_span(int64_t& first, int64_t& latest) const {
  first = state_->first_ns;
  latest = state_->latest_ns;
  return state_->any_range;
}

}  // namespace fqntrace::analysis

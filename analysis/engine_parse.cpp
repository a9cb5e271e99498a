// Event text to Events: a block of whole event lines or one event, parsed with simdjson's
// On-Demand API, reading only the fields the summary and validate's checks use, validating the
// rest.
#include <cstring>

#include "analysis/engine_state.h"

namespace fqntrace::analysis {

// An object's or array's items, validated and counted (Python's truth of it: items > 0).
bool SummaryEngine::State::skip_items(od::value v, od::json_type type, size_t& items) {
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

bool SummaryEngine::State::skip(od::value v) {
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
bool SummaryEngine::State::number(od::value v, Number& out, bool& unsupported) {
  od::json_type type;
  if (v.type().get(type)) return false;
  if (type != od::json_type::number) return skip(v);
  od::number n;
  if (long_number(v.raw_json_token()) || v.get_number().get(n)) {
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
bool SummaryEngine::State::integer(od::value v, bool with_bool, bool& is_int, int64_t& out,
                                   bool& unsupported) {
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

// False: invalid, or (unsupported set) a number beyond 64 bits, whose text is still read.
bool SummaryEngine::State::scalar(od::value v, Scalar& out, bool& unsupported) {
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
void SummaryEngine::State::python_str(const Scalar& s, std::string& out) {
  if (s.type == od::json_type::boolean)
    out = s.boolean ? "True" : "False";
  else if (s.type == od::json_type::null)
    out = "None";
  else
    out.assign(s.text);
}

// A value as a Python dict key (1, 1.0 and True are one key; "1" another). Public to the
// binding through pid_key_of().
std::string SummaryEngine::State::key_of_number(const Number& n, std::string_view raw) {
  if (n.is_int) return "i" + std::to_string(n.i);
  if (std::isfinite(n.d) && n.d == std::floor(n.d) && std::fabs(n.d) < 9e15)
    return "i" + std::to_string(static_cast<int64_t>(n.d));
  return "f" + std::string(raw);
}

void SummaryEngine::State::dict_key(const Scalar& s, std::string& out) {
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
bool SummaryEngine::State::dict_key(od::value v, std::string& out, bool& unsupported) {
  Scalar s;
  if (!scalar(v, s, unsupported)) return false;
  dict_key(s, out);
  return true;
}

bool SummaryEngine::State::truthy(od::value v, bool& out) {
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
      if (long_number(v.raw_json_token()) || v.get_double().get(d))
        return false;  // invalid: Python reads it
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
bool SummaryEngine::State::string_id(od::value x, uint32_t& out) {
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

bool SummaryEngine::State::parse_args(od::value v, Event& e, bool& unsupported) {
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
        phase_text(e, s);
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
    } else if (key == "stack_depth") {
      if (!integer(x, false, e.has_stack_depth, e.stack_depth, unsupported)) return false;
    } else if (key == "node_ns") {
      if (!integer(x, false, e.has_node_ns, e.node_ns, unsupported)) return false;
    } else if (!skip(x)) {
      return false;
    }
  }
  return true;
}

// One event's text (a JSON object, nothing after it) into e. False: not one valid event.
bool SummaryEngine::State::parse_event(const char* data, size_t size, size_t capacity, Event& e) {
  od::document doc;
  if (parser.iterate(data, size, capacity).get(doc) || !parse_doc(doc, e)) return false;
  const char* after;
  return doc.current_location().get(after) != simdjson::SUCCESS;  // nothing after the object
}

// One event's object (a document of a line or of a block's stream) into e.
template <class Doc>
bool SummaryEngine::State::parse_doc(Doc& doc, Event& e) {  // e: a new Event()
  e.name = question_mark;
  e.addr_key = addr_none;
  bool unsupported = false;
  od::object obj;
  if (doc.get_object().get(obj)) return false;
  std::string pid_text = "None", tid_text = "None", pid_key = "n";
  cur_pid_raw.assign("\x01");  // no pid: no raw token is this
  cur_tid_raw.assign("\x01");
  bool pid_parsed = false, tid_parsed = false;
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
        ph_text(e, s);
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
        name_text(e, s);
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
        cat_text(e, s);
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
  resolve_thread(e, pid_parsed, tid_parsed, pid_text, tid_text, pid_key);
  return true;
}

// The values parse_doc and the plain-line path read alike: one rule each.
void SummaryEngine::State::ph_text(Event& e, std::string_view s) {
  e.ph_str = true;
  if (s.size() == 1 && (s[0] == 'X' || s[0] == 'i' || s[0] == 's' || s[0] == 'f' || s[0] == 'M'))
    e.ph = s[0];
  else if (s == "footer")
    e.ph = 'F';  // a JSON Lines footer is no event
}

// What a name is (the flags name_text sets), worked out once per distinct name.
enum NameKind : uint8_t {
  kKindKnown = 1,
  kKindMemory = 2,
  kKindWrapper = 4,
  kKindStep = 8,
  kKindCompiled = 16
};

static uint8_t name_kind(std::string_view s) {
  uint8_t kind = kKindKnown;
  if (s == "[memory]") kind |= kKindMemory;
  if (s.substr(0, kEngineWrapper.size()) == kEngineWrapper) kind |= kKindWrapper;
  if (s.substr(0, kStepPrefix.size()) == kStepPrefix) kind |= kKindStep;
  if (s == "CompiledFunction" || s == "CompiledFunctionBackward" ||
      s.substr(0, kCompiledRegion.size()) == kCompiledRegion)
    kind |= kKindCompiled;
  return kind;
}

void SummaryEngine::State::name_text(Event& e, std::string_view s) {
  e.name = strings.id(s);
  if (e.name >= name_kinds.size()) name_kinds.resize(strings.size(), 0);
  uint8_t& kind = name_kinds[e.name];
  if (kind == 0) kind = name_kind(s);
  e.name_is_str = true;
  e.name_is_memory = (kind & kKindMemory) != 0;
  e.name_is_wrapper = (kind & kKindWrapper) != 0;
  e.name_is_step = (kind & kKindStep) != 0;
  e.name_is_compiled = (kind & kKindCompiled) != 0;
}

void SummaryEngine::State::cat_text(Event& e, std::string_view s) {
  if (checks != nullptr) e.cat_text = strings.id(s);  // a flow's key
  if (s == "cpu_op")
    e.cat = kCatCpuOp;
  else if (s == "user_annotation")
    e.cat = kCatUserAnnotation;
  else if (s == "kernel" || s == "gpu_memcpy" || s == "gpu_memset")
    e.cat = kCatDevice;
  else if (s == "module_span")
    e.cat = kCatModuleSpan;
}

void SummaryEngine::State::phase_text(Event& e, std::string_view s) {
  if (s == "forward")
    e.phase = 0;
  else if (s == "backward")
    e.phase = 1;
  else if (s == "recompute")
    e.phase = 2;
  else
    e.phase = 4 + strings.id("s" + std::string(s));
}

// The event's thread from its pid's and tid's raw tokens (cur_pid_raw, cur_tid_raw), the texts
// of those parsed (the others are the last event's: cached).
void SummaryEngine::State::resolve_thread(Event& e, bool pid_parsed, bool tid_parsed,
                                          std::string& pid_text, std::string& tid_text,
                                          std::string& pid_key) {
  if (checks != nullptr) {
    e.has_pid = present(cur_pid_raw);
    e.has_tid = present(cur_tid_raw);
    e.odd_thread = (e.has_pid && !plain(cur_pid_raw)) || (e.has_tid && !plain(cur_tid_raw));
  }
  if (cache_valid && cur_pid_raw == cached_pid_raw && cur_tid_raw == cached_tid_raw) {
    e.thread = cached_thread;  // most events are on the thread of the event before
    e.pid_str = cached_pid_str;
    e.pid_key = cached_pid_key;
    return;
  }
  // One of the two is the last event's: its texts come from the cache.
  if (!pid_parsed && cache_valid && cur_pid_raw == cached_pid_raw) {
    pid_text = strings.str(cached_pid_str);
    pid_key = strings.str(cached_pid_key);
  }
  if (!tid_parsed && cache_valid && cur_tid_raw == cached_tid_raw) tid_text = cached_tid_text;
  std::string text = pid_text;
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
}

// A string or an integer: str() and the thread key agree with the raw token.
bool SummaryEngine::State::plain(const std::string& raw) {
  if (!raw.empty() && raw[0] == '"') return true;
  for (char c : raw)
    if (!(c == '-' || (c >= '0' && c <= '9'))) return false;
  return !raw.empty();
}

// A flow's id: an int or a string as a key of its own; anything else is left to Python.
bool SummaryEngine::State::flow_id(od::value x, Event& e, bool& unsupported) {
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

void SummaryEngine::State::clear_args(Event& e) const {
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
  e.has_stack_depth = e.has_node_ns = false;
  e.stack_depth = e.node_ns = 0;
}

long SummaryEngine::State::feed(const char* data, size_t size, bool block) {
  if (!ranges_sorted) {
    for (auto& [pid, rs] : ranges) std::sort(rs.begin(), rs.end());
    ranges_sorted = true;
  }
  events.clear();
  if (block) return feed_lines(data, size);
  // One event, its separator and whitespace around it trimmed.
  size_t a = 0, b = size;
  while (a < b && (data[a] == ' ' || data[a] == '\t' || data[a] == '\r' || data[a] == '\n')) ++a;
  while (b > a &&
         (data[b - 1] == ' ' || data[b - 1] == '\t' || data[b - 1] == '\r' || data[b - 1] == '\n'))
    --b;
  if (!jsonl && b > a && data[b - 1] == ',') {
    --b;  // a Chrome line's separator
    while (b > a && (data[b - 1] == ' ' || data[b - 1] == '\t')) --b;
  }
  if (a == b) return consume();  // a blank line
  if (data[a] != '{') return kInvalid;
  const char* text = padded(data + a, b - a);
  events.emplace_back();
  if (!parse_event(text, b - a, b - a + simdjson::SIMDJSON_PADDING, events.back())) return kInvalid;
  if (jsonl && events.back().ph == 'F') return kInvalid;  // the reader reads the footer
  return consume();
}

// simdjson reads past a text's end: a copy with its padding after it.
char* SummaryEngine::State::padded(const char* data, size_t size) {
  if (buffer.size() < size + simdjson::SIMDJSON_PADDING)
    buffer.resize(size + simdjson::SIMDJSON_PADDING);
  std::memcpy(buffer.data(), data, size);
  std::memset(buffer.data() + size, 0, simdjson::SIMDJSON_PADDING);
  return buffer.data();
}

static const Event kBlankEvent{};

// A block of event lines, read in place: each line by the plain-line path (plain_line), and a
// line it does not take (escapes, non-ASCII text, nested values, exponents) by simdjson, its
// comma blanked in a padded copy, every object on it an event.
long SummaryEngine::State::feed_lines(const char* base, size_t total) {
  const char* p = base;
  const char* limit = base + total;
  while (p < limit) {
    while (p < limit && (*p == ' ' || *p == '\t' || *p == '\r')) ++p;
    if (p == limit) break;
    if (*p == '\n') {  // a blank line
      ++p;
      continue;
    }
    events.push_back(kBlankEvent);  // a copy: zeroing an Event in place took a `rep stos`
    const char* end = plain_line(p, limit, events.back());
    if (end != nullptr) {
      if (jsonl && events.back().ph == 'F') return kInvalid;  // the reader reads the footer
    } else {
      events.pop_back();
      const void* nl = std::memchr(p, '\n', static_cast<size_t>(limit - p));
      end = nl == nullptr ? limit : static_cast<const char*>(nl);
      if (!simdjson_line(p, end)) return kInvalid;  // a footer too
    }
    p = end + 1;
  }
  return consume();
}

// One line's objects by simdjson (iterate_many), appended to events. False: not valid events.
bool SummaryEngine::State::simdjson_line(const char* p, const char* end) {
  size_t b = static_cast<size_t>(end - p);
  while (b > 0 && (p[b - 1] == ' ' || p[b - 1] == '\t' || p[b - 1] == '\r')) --b;
  char* text = padded(p, b);
  if (!jsonl && b > 0 && text[b - 1] == ',') text[b - 1] = ' ';  // a Chrome line's separator
  od::document_stream stream;
  if (parser.iterate_many(text, b, std::max<size_t>(b, 1 << 16)).get(stream)) return false;
  for (auto it = stream.begin(); it != stream.end(); ++it) {
    od::document_reference doc;
    if ((*it).get(doc)) return false;
    events.emplace_back();
    if (!parse_doc(doc, events.back())) return false;
    if (jsonl && events.back().ph == 'F') return false;
  }
  return stream.truncated_bytes() == 0;
}

}  // namespace fqntrace::analysis

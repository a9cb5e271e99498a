// The core's own event lines without simdjson: an object of plain values, as the core writes
// them, read byte by byte into an Event by the same rules as parse_doc (engine_parse.cpp shares
// the rules for ph, name, cat, phase and the thread). simdjson's On-Demand reader validates and
// walks any JSON; most of a summary's time went there (docs/benchmarks.md), and a trace's lines
// are nearly all of this one shape. A line that is not plain — an escape, a byte outside
// printable ASCII, an array, true/false/null, an exponent, a known key twice — is left to
// simdjson, so what plain_line accepts it reads exactly as parse_doc would, and it never judges
// a line invalid.
#include <cstring>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "analysis/engine_state.h"

namespace fqntrace::analysis {

namespace engine {

// A plain value: a string (its text between the quotes) or a number (its token; an int, or a
// float that converts exactly by one division).
struct Plain {
  enum Kind : uint8_t { kString, kInt, kFloat } kind = kString;
  std::string_view text;
  Number n;
};

}  // namespace engine

namespace {

inline const char* blanks(const char* p, const char* end) {
  // The core writes no blanks between tokens: one compare for the common case.
  bool at_token = (p < end) && (*p > ' ');  // no blank, whether char is signed or not
  if (__builtin_expect(at_token, 1)) return p;
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\r')) ++p;
  return p;
}

// From just after an opening quote: past the closing one, text set; nullptr when the string is
// not printable ASCII without escapes. Sixteen bytes at a time where they lie before `end`: a
// byte below 0x20 or from 0x80 is below 0x20 as a signed char, so one compare finds both.
inline const char* plain_string(const char* p, const char* end, std::string_view& text) {
  const char* start = p;
#ifdef __SSE2__
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
  const __m128i space = _mm_set1_epi8(0x20);
  while (end - p >= 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    int quotes = _mm_movemask_epi8(_mm_cmpeq_epi8(v, quote));
    int others =
        _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, backslash), _mm_cmplt_epi8(v, space)));
    if ((quotes | others) == 0) {
      p += 16;
      continue;
    }
    int first = __builtin_ctz(static_cast<unsigned>(quotes | others));
    if ((others >> first) & 1) return nullptr;
    p += first;
    text = std::string_view(start, static_cast<size_t>(p - start));
    return p + 1;
  }
#endif
  for (; p < end; ++p) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (c == '"') {
      text = std::string_view(start, static_cast<size_t>(p - start));
      return p + 1;
    }
    if (c == '\\' || c < 0x20 || c >= 0x80) return nullptr;
  }
  return nullptr;
}

// Exact powers of ten as doubles (10^15 < 2^53).
constexpr double kPow10[] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                             1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};

// A JSON number without an exponent. An int of at most 18 digits fits int64_t. A float of at
// most 15 digits is m / 10^k with both exact doubles, so the division's correctly rounded
// quotient is the double nearest the decimal, as simdjson (and Python) parse it.
inline const char* plain_number(const char* p, const char* end, Plain& v) {
  const char* start = p;
  bool negative = p < end && *p == '-';
  if (negative) ++p;
  const char* digits = p;
  uint64_t m = 0;
  while (p < end && static_cast<unsigned>(*p - '0') < 10) m = m * 10 + (*p++ - '0');
  size_t int_digits = static_cast<size_t>(p - digits);
  if (int_digits == 0 || int_digits > 18 || (int_digits > 1 && *digits == '0')) return nullptr;
  v.n = Number();
  v.n.ok = true;
  if (p == end || *p != '.') {
    if (p < end && (*p == 'e' || *p == 'E')) return nullptr;
    v.kind = Plain::kInt;
    v.n.is_int = true;
    v.n.i = negative ? -static_cast<int64_t>(m) : static_cast<int64_t>(m);
    v.text = std::string_view(start, static_cast<size_t>(p - start));
    return p;
  }
  const char* fraction = ++p;
  while (p < end && static_cast<unsigned>(*p - '0') < 10) m = m * 10 + (*p++ - '0');
  size_t frac_digits = static_cast<size_t>(p - fraction);
  if (frac_digits == 0 || int_digits + frac_digits > 15) return nullptr;
  if (p < end && (*p == 'e' || *p == 'E')) return nullptr;
  v.kind = Plain::kFloat;
  double d = static_cast<double>(m) / kPow10[frac_digits];
  v.n.d = negative ? -d : d;
  v.text = std::string_view(start, static_cast<size_t>(p - start));
  return p;
}

inline const char* plain_value(const char* p, const char* end, Plain& v) {
  if (p < end && *p == '"') {
    v.kind = Plain::kString;
    return plain_string(p + 1, end, v.text);
  }
  return plain_number(p, end, v);
}

// A key, the colon and the blanks after it: at the value, or nullptr.
inline const char* plain_key(const char* p, const char* end, std::string_view& key) {
  if (p >= end || *p != '"') return nullptr;
  p = plain_string(p + 1, end, key);
  if (p == nullptr) return nullptr;
  if (p >= end || *p != ':') {  // the core writes the colon right after the key
    p = blanks(p, end);
    if (p >= end || *p != ':') return nullptr;
  }
  return blanks(p + 1, end);
}

// After a value: past the comma (more: true) or the closing brace (more: false), or nullptr.
inline const char* next_item(const char* p, const char* end, bool& more) {
  if (p >= end || (*p != ',' && *p != '}')) p = blanks(p, end);  // none in the core's lines
  if (p >= end) return nullptr;
  if (*p == ',') {
    more = true;
    return blanks(p + 1, end);
  }
  if (*p != '}') return nullptr;
  more = false;
  return p + 1;
}

// integer(): an exact int sets the flag and the value; a float or a string neither (0).
inline void plain_integer(const Plain& v, bool& is_int, int64_t& out) {
  is_int = v.kind == Plain::kInt;
  out = is_int ? v.n.i : 0;
}

// Each known key once, or simdjson reads the line (the last of repeated keys counts there):
// false when `bit` is in `seen` already; it is there afterwards.
inline bool first_time(uint32_t& seen, uint32_t bit) {
  bool first = (seen & bit) == 0;
  seen |= bit;
  return first;
}

// The top-level keys' bits.
enum TopKey : uint32_t {
  kPh = 1,
  kName = 2,
  kCat = 4,
  kTs = 8,
  kDur = 16,
  kPid = 32,
  kTid = 64,
  kId = 128,
  kArgs = 256
};

// The int arguments integer() reads: each sets its flag (an exact int) and value.
struct IntArg {
  std::string_view key;
  bool Event::*is_int;
  int64_t Event::*value;
};
constexpr IntArg kIntArgs[] = {
    {"depth", &Event::has_depth, &Event::depth},
    {"bytes", &Event::bytes_int, &Event::bytes},
    {"flops", &Event::flops_int, &Event::flops},
    {"Bytes", &Event::size_int, &Event::size},
    {"stack_depth", &Event::has_stack_depth, &Event::stack_depth},
    {"node_ns", &Event::has_node_ns, &Event::node_ns},
};

}  // namespace

// One of args' items, as parse_args reads it. False: simdjson's path (a known key twice, a
// phase that is a number).
bool SummaryEngine::State::plain_arg(std::string_view arg, const Plain& v, Event& e,
                                     uint32_t& seen) {
  auto once = [&seen](uint32_t bit) { return first_time(seen, bit); };
  bool text = v.kind == Plain::kString;
  if (arg == "fqn") {  // the keys of every event first
    if (!once(1)) return false;
    e.fqn = text ? strings.id(v.text) : kNone;
    return true;
  }
  if (arg == "phase") {
    if (!once(2) || !text) return false;  // a number's key: simdjson's path
    phase_text(e, v.text);
    return true;
  }
  for (size_t i = 0; i < sizeof(kIntArgs) / sizeof(kIntArgs[0]); ++i) {
    if (arg != kIntArgs[i].key) continue;
    if (!once(1u << (16 + i))) return false;
    plain_integer(v, e.*kIntArgs[i].is_int, e.*kIntArgs[i].value);
    return true;
  }
  if (arg == "self_cpu_ns") {
    if (!once(4)) return false;
    if (!text) e.cpu = v.n;
  } else if (arg == "module_type") {
    if (!once(8)) return false;
    e.has_module_type = true;
    e.module_type = text ? strings.id(v.text) : kNone;
  } else if (arg == "async_work") {
    if (!once(16)) return false;
    e.async_work = text ? !v.text.empty() : v.n.is_int ? v.n.i != 0 : v.n.d != 0;
  } else if (arg == "collective") {
    e.has_collective = true;
  } else if (arg == "Fwd thread id") {
    e.has_fwd_thread = true;
  } else if (arg == "Addr") {
    if (!once(32)) return false;
    e.addr_key = strings.id(text ? "s" + std::string(v.text) : key_of_number(v.n, v.text));
  }
  return true;
}

const char* SummaryEngine::State::plain_line(const char* p, const char* end, Event& e) {
  if (p >= end || *p != '{') return nullptr;
  e.name = question_mark;
  e.addr_key = addr_none;
  std::string_view pid_raw, tid_raw;
  Number pid;
  uint32_t seen = 0;
  uint32_t args_seen = 0;
  p = blanks(p + 1, end);
  bool more = p >= end || *p != '}';  // `{}`: no items; at the end: plain_key says no
  if (!more) ++p;
  while (more) {
    std::string_view key;
    p = plain_key(p, end, key);
    if (p == nullptr) return nullptr;
    if (p < end && *p == '{') {
      if (key != "args" || !first_time(seen, kArgs)) return nullptr;
      clear_args(e);
      e.args = true;
      p = blanks(p + 1, end);
      bool args_more = p >= end || *p != '}';
      if (!args_more) ++p;
      while (args_more) {
        std::string_view arg;
        Plain v;
        p = plain_key(p, end, arg);
        if (p == nullptr || (p = plain_value(p, end, v)) == nullptr) return nullptr;
        if (!plain_arg(arg, v, e, args_seen)) return nullptr;
        if ((p = next_item(p, end, args_more)) == nullptr) return nullptr;
      }
    } else {
      Plain v;
      if ((p = plain_value(p, end, v)) == nullptr) return nullptr;
      bool text = v.kind == Plain::kString;
      if (key == "ph") {
        if (!first_time(seen, kPh)) return nullptr;
        if (text) ph_text(e, v.text);
      } else if (key == "name") {
        if (!first_time(seen, kName)) return nullptr;
        if (text) name_text(e, v.text);
      } else if (key == "cat") {
        if (!first_time(seen, kCat)) return nullptr;
        e.cat_kind = text ? 1 : 2;
        if (text) cat_text(e, v.text);
      } else if (key == "ts") {
        if (!first_time(seen, kTs)) return nullptr;
        if (!text) e.ts = v.n;
      } else if (key == "dur") {
        if (!first_time(seen, kDur)) return nullptr;
        if (!text) e.dur = v.n;
      } else if (key == "pid") {
        if (!first_time(seen, kPid) || v.kind != Plain::kInt)
          return nullptr;  // strings: simdjson's
        pid_raw = v.text;
        pid = v.n;
      } else if (key == "tid") {
        if (!first_time(seen, kTid) || v.kind != Plain::kInt) return nullptr;
        tid_raw = v.text;
      } else if (key == "id" && checks != nullptr) {
        if (!first_time(seen, kId)) return nullptr;
        e.id_kind = text ? 2 : v.kind == Plain::kInt ? 1 : 3;
        if (v.kind == Plain::kInt) e.id_int = v.n.i;
        if (text) e.id_text = strings.id(v.text);
      } else if (key == "args") {
        if (!first_time(seen, kArgs)) return nullptr;
        clear_args(e);  // not an object: no args
      }
    }
    if ((p = next_item(p, end, more)) == nullptr) return nullptr;
  }
  p = blanks(p, end);
  if (!jsonl && p < end && *p == ',') p = blanks(p + 1, end);  // a Chrome line's separator
  if (p != end && *p != '\n') return nullptr;
  const char* line_end = p;

  // The line is taken: its thread, as parse_doc finds it (str() of an int pid or tid is its
  // token).
  cur_pid_raw.assign(seen & kPid ? pid_raw : std::string_view("\x01"));
  cur_tid_raw.assign(seen & kTid ? tid_raw : std::string_view("\x01"));
  bool pid_parsed = (seen & kPid) && !(cache_valid && cur_pid_raw == cached_pid_raw);
  bool tid_parsed = (seen & kTid) && !(cache_valid && cur_tid_raw == cached_tid_raw);
  std::string pid_text = "None", tid_text = "None", pid_key = "n";
  if (pid_parsed) {
    pid_text.assign(pid_raw);
    pid_key = key_of_number(pid, pid_raw);
  }
  if (tid_parsed) tid_text.assign(tid_raw);
  resolve_thread(e, pid_parsed, tid_parsed, pid_text, tid_text, pid_key);
  return line_end;
}

}  // namespace fqntrace::analysis

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

// key == literal, compared as a constant number of bytes (a word compare, not a call).
template <size_t N>
inline bool is(std::string_view key, const char (&literal)[N]) {
  return key.size() == N - 1 && std::memcmp(key.data(), literal, N - 1) == 0;
}

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

// The word-at-a-time reads below take a text's first byte as a word's lowest.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the plain-line reader is little-endian");

// How many of eight bytes (the first in the low byte) are ASCII digits before the first that
// is not one. Subtracting '0' from every byte borrows only out of a byte below '0', and adding
// 0x76 carries only out of a byte that is no digit, so the bytes before the first non-digit are
// exact; a digit byte becomes 0..9 and every other byte has its top bit set by one of the two.
inline int leading_digits(uint64_t word, uint64_t& values) {
  values = word - 0x3030303030303030ull;
  uint64_t not_digit = (values | (values + 0x7676767676767676ull)) & 0x8080808080808080ull;
  return not_digit == 0 ? 8 : __builtin_ctzll(not_digit) >> 3;
}

// The number the first n (1..8) digit values of `values` spell, the first the most significant:
// shifted so that the digits fill the high bytes behind zeros, then pairs, quads and the eight
// combined by three multiplies.
inline uint64_t digits_value(uint64_t values, int n) {
  uint64_t v = values << (8 * (8 - n));
  v = (v * 10 + (v >> 8)) & 0x00ff00ff00ff00ffull;         // two digits in each 16 bits
  v = (v * 100 + (v >> 16)) & 0x0000ffff0000ffffull;       // four in each 32 bits
  return (v * 10000 + (v >> 32)) & 0x00000000ffffffffull;  // eight
}

constexpr uint64_t kPow10Int[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};

// The digits from p: their value added to m (m * 10^digits + value) and the end of the run.
// Eight bytes at a time while eight lie before `end`.
inline const char* digit_run(const char* p, const char* end, uint64_t& m) {
  while (end - p >= 8) {
    uint64_t values;
    int n = leading_digits(load_word(p), values);
    if (n == 0) return p;
    m = m * kPow10Int[n] + digits_value(values, n);
    p += n;
    if (n < 8) return p;
  }
  while (p < end && static_cast<unsigned>(*p - '0') < 10) m = m * 10 + (*p++ - '0');
  return p;
}

// A JSON number without an exponent. An int of at most 18 digits fits int64_t. A float of at
// most 15 digits is m / 10^k with both exact doubles, so the division's correctly rounded
// quotient is the double nearest the decimal, as simdjson (and Python) parse it.
//
// A time (ns_only: ts, dur), which the rules read only as round(x * 1000) in ns, skips the
// division when it has at most three decimals and |m * 10^(3 - k)| < 2^50: then the double
// nearest m / 10^k, times 1000, is within 1/4 of that integer, so round() gives it exactly.
inline const char* plain_number(const char* p, const char* end, Plain& v, bool ns_only) {
  const char* start = p;
  bool negative = p < end && *p == '-';
  if (negative) ++p;
  const char* digits = p;
  uint64_t m = 0;
  p = digit_run(p, end, m);
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
  p = digit_run(p, end, m);
  size_t frac_digits = static_cast<size_t>(p - fraction);
  if (frac_digits == 0 || int_digits + frac_digits > 15) return nullptr;
  if (p < end && (*p == 'e' || *p == 'E')) return nullptr;
  v.kind = Plain::kFloat;
  if (ns_only && frac_digits <= 3) {
    uint64_t ns = m * kPow10Int[3 - frac_digits];  // m < 10^15: no overflow
    if (ns < (uint64_t{1} << 50)) {
      v.n.exact_ns = true;
      v.n.ns_value = negative ? -static_cast<int64_t>(ns) : static_cast<int64_t>(ns);
      v.text = std::string_view(start, static_cast<size_t>(p - start));
      return p;
    }
  }
  double d = static_cast<double>(m) / kPow10[frac_digits];
  v.n.d = negative ? -d : d;
  v.text = std::string_view(start, static_cast<size_t>(p - start));
  return p;
}

inline const char* plain_value(const char* p, const char* end, Plain& v, bool ns_only = false) {
  if (p < end && *p == '"') {
    v.kind = Plain::kString;
    return plain_string(p + 1, end, v.text);
  }
  return plain_number(p, end, v, ns_only);
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

// to = from, a field at a time: a plain value's flags are in registers, and a copy of the whole
// struct made the compiler store them a byte at a time and load them back as one vector, which
// the CPU cannot forward from the stores (a stall of a dozen cycles per number).
inline void copy_number(Number& to, const Number& from) {
  to.ok = from.ok;
  to.is_int = from.is_int;
  to.exact_ns = from.exact_ns;
  to.i = from.i;
  to.d = from.d;
  to.ns_value = from.ns_value;
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

// The keys the rules read, top-level (their bits in `seen`: 1 << key) and in args. Any other
// key's value is read and dropped.
enum TopKey : uint8_t { kPh, kName, kCat, kTs, kDur, kPid, kTid, kId, kArgs, kOtherKey };
enum ArgKey : uint8_t {
  kFqn,
  kPhase,
  kDepth,  // kDepth .. kNodeNs: the int arguments, in kIntArgs' order
  kBytes,
  kFlops,
  kSize,
  kStackDepth,
  kNodeNs,
  kSelfCpu,
  kModuleType,
  kAsyncWork,
  kCollective,
  kFwdThread,
  kAddr,
  kOtherArg
};

constexpr uint32_t bit(uint8_t key) { return 1u << key; }

inline TopKey top_key(std::string_view k) {
  if (is(k, "ph")) return kPh;
  if (is(k, "name")) return kName;
  if (is(k, "cat")) return kCat;
  if (is(k, "ts")) return kTs;
  if (is(k, "dur")) return kDur;
  if (is(k, "pid")) return kPid;
  if (is(k, "tid")) return kTid;
  if (is(k, "id")) return kId;
  if (is(k, "args")) return kArgs;
  return kOtherKey;
}

inline ArgKey arg_key(std::string_view k) {
  if (is(k, "fqn")) return kFqn;  // the keys of every event first
  if (is(k, "phase")) return kPhase;
  if (is(k, "depth")) return kDepth;
  if (is(k, "bytes")) return kBytes;
  if (is(k, "flops")) return kFlops;
  if (is(k, "Bytes")) return kSize;
  if (is(k, "stack_depth")) return kStackDepth;
  if (is(k, "node_ns")) return kNodeNs;
  if (is(k, "self_cpu_ns")) return kSelfCpu;
  if (is(k, "module_type")) return kModuleType;
  if (is(k, "async_work")) return kAsyncWork;
  if (is(k, "collective")) return kCollective;
  if (is(k, "Fwd thread id")) return kFwdThread;
  if (is(k, "Addr")) return kAddr;
  return kOtherArg;
}

// A key the core writes next, as its bytes: the quoted key and the colon, at most eight bytes,
// matched by one masked compare of a word.
struct ExpectedKey {
  uint64_t word = 0, mask = 0;
  uint8_t key = 0;  // a TopKey or an ArgKey
  uint8_t size = 0;
};

template <size_t N>
constexpr ExpectedKey expect(const char (&quoted)[N], uint8_t key) {
  static_assert(N - 1 <= 8, "a key and its colon in one word");
  ExpectedKey x;
  for (size_t i = 0; i < N - 1; ++i) {
    x.word |= uint64_t(uint8_t(quoted[i])) << (8 * i);
    x.mask |= uint64_t(0xff) << (8 * i);
  }
  x.key = key;
  x.size = N - 1;
  return x;
}

// The order the core writes an event's keys in (exporters/event_lines.cpp): after each key, the
// one that usually follows it; kOtherKey has none.
constexpr ExpectedKey kNextTop[] = {
    expect("\"cat\":", kCat),    // after ph
    expect("\"pid\":", kPid),    // after name
    expect("\"name\":", kName),  // after cat
    expect("\"dur\":", kDur),    // after ts
    expect("\"args\":", kArgs),  // after dur
    expect("\"tid\":", kTid),    // after pid
    expect("\"ts\":", kTs),      // after tid
    expect("\"pid\":", kPid),    // after id (a flow's)
    {},                          // after args: the end
    {},
};
static_assert(sizeof(kNextTop) / sizeof(kNextTop[0]) == kOtherKey + 1, "one per TopKey");
constexpr ExpectedKey kFirstTop = expect("\"ph\":", kPh);
constexpr ExpectedKey kFirstArg = expect("\"fqn\":", kFqn);
constexpr ExpectedKey kAfterFqn = expect("\"phase\":", kPhase);
constexpr ExpectedKey kLastArg = expect("\"depth\":", kDepth);  // after any other argument

// At the expected key: past its colon and the blanks after it.
inline bool at_key(const char*& p, const char* end, const ExpectedKey& x) {
  if (x.size == 0 || end - p < 8) return false;
  if ((load_word(p) & x.mask) != x.word) return false;
  p = blanks(p + x.size, end);
  return true;
}

// The int arguments integer() reads: each sets its flag (an exact int) and value.
struct IntArg {
  bool Event::*is_int;
  int64_t Event::*value;
};
constexpr IntArg kIntArgs[] = {
    {&Event::has_depth, &Event::depth},
    {&Event::bytes_int, &Event::bytes},
    {&Event::flops_int, &Event::flops},
    {&Event::size_int, &Event::size},
    {&Event::has_stack_depth, &Event::stack_depth},
    {&Event::has_node_ns, &Event::node_ns},
};

}  // namespace

// One of args' items, as parse_args reads it. False: simdjson's path (a known key twice, a
// phase that is a number).
bool SummaryEngine::State::plain_arg(uint8_t arg, const Plain& v, Event& e, uint32_t& seen) {
  bool text = v.kind == Plain::kString;
  if (arg != kCollective && arg != kFwdThread && arg != kOtherArg && !first_time(seen, bit(arg)))
    return false;  // a known key twice
  switch (arg) {
    case kFqn:
      e.fqn = text ? strings.id(v.text) : kNone;
      break;
    case kPhase:
      if (!text) return false;  // a number's key: simdjson's path
      phase_text(e, v.text);
      break;
    case kDepth:
    case kBytes:
    case kFlops:
    case kSize:
    case kStackDepth:
    case kNodeNs: {
      const IntArg& a = kIntArgs[arg - kDepth];
      plain_integer(v, e.*a.is_int, e.*a.value);
      break;
    }
    case kSelfCpu:
      if (!text) copy_number(e.cpu, v.n);
      break;
    case kModuleType:
      e.has_module_type = true;
      e.module_type = text ? strings.id(v.text) : kNone;
      break;
    case kAsyncWork:
      e.async_work = text ? !v.text.empty() : v.n.is_int ? v.n.i != 0 : v.n.d != 0;
      break;
    case kCollective:
      e.has_collective = true;
      break;
    case kFwdThread:
      e.has_fwd_thread = true;
      break;
    case kAddr:
      e.addr_key = strings.id(text ? "s" + std::string(v.text) : key_of_number(v.n, v.text));
      break;
    default:
      break;
  }
  return true;
}

// args' object, from just after its brace: past the closing one, or nullptr.
const char* SummaryEngine::State::plain_args(const char* p, const char* end, Event& e) {
  clear_args(e);
  e.args = true;
  uint32_t seen = 0;
  p = blanks(p, end);
  bool more = p >= end || *p != '}';
  if (!more) ++p;
  const ExpectedKey* expected = &kFirstArg;
  Plain v;  // once per line: zeroing it per value cost a `rep stos`; each read sets what it says
  while (more) {
    uint8_t arg;
    if (at_key(p, end, *expected)) {
      arg = expected->key;
    } else {
      std::string_view text;
      if ((p = plain_key(p, end, text)) == nullptr) return nullptr;
      arg = arg_key(text);
    }
    expected = arg == kFqn ? &kAfterFqn : &kLastArg;
    if ((p = plain_value(p, end, v)) == nullptr) return nullptr;
    if (!plain_arg(arg, v, e, seen)) return nullptr;
    if ((p = next_item(p, end, more)) == nullptr) return nullptr;
  }
  return p;
}

const char* SummaryEngine::State::plain_line(const char* p, const char* end, Event& e) {
  if (p >= end || *p != '{') return nullptr;
  e.name = question_mark;
  e.addr_key = addr_none;
  std::string_view pid_raw, tid_raw;
  Number pid;
  uint32_t seen = 0;
  p = blanks(p + 1, end);
  bool more = p >= end || *p != '}';  // `{}`: no items; at the end: plain_key says no
  if (!more) ++p;
  const ExpectedKey* expected = &kFirstTop;
  Plain v;  // once per line, as in plain_args
  while (more) {
    uint8_t key;
    if (at_key(p, end, *expected)) {  // the core's order: no key to read
      key = expected->key;
    } else {
      std::string_view text;
      if ((p = plain_key(p, end, text)) == nullptr) return nullptr;
      key = top_key(text);
    }
    expected = &kNextTop[key];
    if (key == kId && checks == nullptr) key = kOtherKey;  // only validate reads a flow's id
    bool known = key != kOtherKey;
    if (p < end && *p == '{') {
      if (key != kArgs || !first_time(seen, bit(kArgs))) return nullptr;
      if ((p = plain_args(p + 1, end, e)) == nullptr) return nullptr;
    } else {
      if ((p = plain_value(p, end, v, key == kTs || key == kDur)) == nullptr) return nullptr;
      if (known && !first_time(seen, bit(key))) return nullptr;
      bool text = v.kind == Plain::kString;
      switch (key) {
        case kPh:
          if (text) ph_text(e, v.text);
          break;
        case kName:
          if (text) name_text(e, v.text);
          break;
        case kCat:
          e.cat_kind = text ? 1 : 2;
          if (text) cat_text(e, v.text);
          break;
        case kTs:
          if (!text) copy_number(e.ts, v.n);
          break;
        case kDur:
          if (!text) copy_number(e.dur, v.n);
          break;
        case kPid:
          if (v.kind != Plain::kInt) return nullptr;  // strings: simdjson's
          pid_raw = v.text;
          copy_number(pid, v.n);
          break;
        case kTid:
          if (v.kind != Plain::kInt) return nullptr;
          tid_raw = v.text;
          break;
        case kId:
          e.id_kind = text ? 2 : v.kind == Plain::kInt ? 1 : 3;
          if (v.kind == Plain::kInt) e.id_int = v.n.i;
          if (text) e.id_text = strings.id(v.text);
          break;
        case kArgs:
          clear_args(e);  // not an object: no args
          break;
        default:
          break;
      }
    }
    if ((p = next_item(p, end, more)) == nullptr) return nullptr;
  }
  p = blanks(p, end);
  if (!jsonl && p < end && *p == ',') p = blanks(p + 1, end);  // a Chrome line's separator
  if (p != end && *p != '\n') return nullptr;
  const char* line_end = p;

  // The line is taken: its thread, as parse_doc finds it (str() of an int pid or tid is its
  // token). Most lines are on the thread of the line before: its ids, nothing built.
  bool has_pid = (seen & bit(kPid)) != 0, has_tid = (seen & bit(kTid)) != 0;
  if (cache_valid && has_pid && has_tid && same_text(pid_raw, cached_pid_raw) &&
      same_text(tid_raw, cached_tid_raw)) {
    if (checks != nullptr) {  // int tokens: present and plain (resolve_thread's tests)
      e.has_pid = e.has_tid = true;
      e.odd_thread = false;
    }
    e.thread = cached_thread;
    e.pid_str = cached_pid_str;
    e.pid_key = cached_pid_key;
    return line_end;
  }
  cur_pid_raw.assign(has_pid ? pid_raw : std::string_view("\x01"));
  cur_tid_raw.assign(has_tid ? tid_raw : std::string_view("\x01"));
  bool pid_parsed = has_pid && !(cache_valid && cur_pid_raw == cached_pid_raw);
  bool tid_parsed = has_tid && !(cache_valid && cur_tid_raw == cached_tid_raw);
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

#include "analysis/merge_engine.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "analysis/ondemand_text.h"

namespace fqntrace::analysis {
namespace {

namespace od = simdjson::ondemand;

constexpr std::string_view kProcessRows[] = {"\"process_name\"", "\"process_labels\"",
                                             "\"process_sort_index\""};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// key == literal, compared with a constant size (inlined, no memcmp call per key).
template <size_t N>
bool is(std::string_view key, const char (&literal)[N]) {
  return key.size() == N - 1 && std::memcmp(key.data(), literal, N - 1) == 0;
}

// One bit per key of an object, so most keys need no comparison to tell they are not repeated.
uint64_t key_bit(std::string_view key) {
  unsigned h = static_cast<unsigned>(key.size()) * 31u;
  if (!key.empty())
    h += static_cast<unsigned char>(key[0]) * 7u + static_cast<unsigned char>(key.back());
  return uint64_t(1) << (h & 63u);
}

// A string's JSON text (quotes included) is what msgspec.json.encode writes for its value: the
// only escapes are \" \\ \n \r \t \b \f and \u00xx (lower-case) for the other control characters.
// Stage 1 has checked the UTF-8 and that no control character is left unescaped.
bool canonical_string(std::string_view raw) {
  const char* p = raw.data() + 1;
  const char* end = raw.data() + raw.size() - 1;
  while (p < end) {
    const void* slash = std::memchr(p, '\\', static_cast<size_t>(end - p));
    if (slash == nullptr) return true;
    p = static_cast<const char*>(slash) + 1;
    char c = *p;
    if (c == '"' || c == '\\' || c == 'n' || c == 'r' || c == 't' || c == 'b' || c == 'f') {
      ++p;
      continue;
    }
    if (c != 'u' || end - p < 5 || p[1] != '0' || p[2] != '0' || (p[3] != '0' && p[3] != '1'))
      return false;
    int low = p[4] >= '0' && p[4] <= '9'   ? p[4] - '0'
              : p[4] >= 'a' && p[4] <= 'f' ? p[4] - 'a' + 10
                                           : -1;
    if (low < 0) return false;
    int code = (p[3] - '0') * 16 + low;
    if (code == '\b' || code == '\t' || code == '\n' || code == '\f' || code == '\r') return false;
    p += 5;
  }
  return true;
}

// A number's text is what msgspec writes for the value Python reads: an integer as written (but
// "-0"), a float in plain decimals, its shortest round-trip digits (msgspec switches to an
// exponent outside [1e-5, 1e15): those lines take the Python path).
bool canonical_number(od::number& n, std::string_view raw) {
  if (!n.is_double()) return raw != "-0";
  double d = n.get_double();
  double a = std::fabs(d);
  if (raw.find_first_of("eE") != std::string_view::npos || !(a == 0 || (a >= 1e-5 && a < 1e15)))
    return false;
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf) - 2, d, std::chars_format::fixed);
  if (r.ec != std::errc()) return false;
  std::string_view text(buf, static_cast<size_t>(r.ptr - buf));
  if (text.find('.') == std::string_view::npos) {
    return raw.size() == text.size() + 2 && raw.substr(0, text.size()) == text &&
           raw.substr(text.size()) == ".0";
  }
  return raw == text;
}

// Integer nanoseconds of a time in microseconds as traceio.to_ns computes them (round half to
// even, as Python's round()); false beyond 64 bits (the Python path takes the line).
bool to_ns(od::number& n, int64_t& ns) {
  constexpr int64_t kLimit = 4'000'000'000'000'000'000;
  if (n.is_int64()) {
    int64_t i = n.get_int64();
    if (i > kLimit / 1000 || i < -kLimit / 1000) return false;
    ns = i * 1000;
    return true;
  }
  if (!n.is_double()) return false;  // an unsigned beyond int64
  double x = n.get_double() * 1000.0;
  if (!(std::fabs(x) < static_cast<double>(kLimit))) return false;
  ns = static_cast<int64_t>(std::nearbyint(x));
  return true;
}

// traceio.format_us: microseconds with exactly three decimals.
void append_us(std::string& out, int64_t ns) {
  if (ns < 0) out.push_back('-');
  uint64_t a = ns < 0 ? uint64_t(0) - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), a / 1000);
  out.append(buf, static_cast<size_t>(r.ptr - buf));
  unsigned frac = static_cast<unsigned>(a % 1000);
  out.push_back('.');
  out.push_back(static_cast<char>('0' + frac / 100));
  out.push_back(static_cast<char>('0' + frac / 10 % 10));
  out.push_back(static_cast<char>('0' + frac % 10));
}

void append_int(std::string& out, int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, static_cast<size_t>(r.ptr - buf));
}

// What the second pass changes in one event line (offsets into the block's buffer).
struct Edit {
  size_t begin, end;  // the value's text
  enum Kind : uint8_t { kPid, kTs, kDur, kId } kind;
  int64_t ns;
};

struct LinePlan {
  size_t begin, end;  // the event's text (a Chrome line's comma excluded)
  bool skip = false;  // a process row of the input: replaced by the rank's own
  bool slice = false;
  bool append_pid = false;
  char flow_ph = 0;                   // 's', 't', 'f' with an id: renumbered
  size_t key_begin = 0, key_end = 0;  // the flow's key in State::keys
  Edit edits[4];
  int n_edits = 0;
};

}  // namespace

struct MergeEngine::State {
  od::parser parser;
  std::vector<char> buffer;  // a block copied with simdjson's padding after it
  std::vector<char> minified;
  std::vector<std::pair<size_t, size_t>> lines;  // non-blank lines: [begin, end)
  std::vector<bool> compact;                     // no whitespace outside strings
  std::vector<std::string_view> keys_seen;       // the keys of the objects being read
  bool line_escapes = false;                     // the line being rewritten has a backslash
  std::vector<LinePlan> plans;
  std::string keys;  // flow keys of the block
  std::unordered_set<std::string> pids;
  std::string pid, last_pid_raw = "\x01";  // the first pass's last pid (no token is "\x01")

  bool jsonl = false;
  std::string rank_text;
  int64_t shift = 0;
  struct Flow {
    int64_t id;
    uint8_t ends;  // 1: 's' seen, 2: 'f' seen
  };
  std::unordered_map<std::string, Flow> flows;
  int64_t next_flow = 0;

  // ---- reading -----------------------------------------------------------------------------
  // Reads v whole; false on a parse error, or (exact) when its text is not what the Python path
  // writes for its value (not compact is checked for the whole block beforehand).
  bool walk(od::value v, bool exact) {
    od::json_type type;
    if (v.type().get(type)) return false;
    switch (type) {
      case od::json_type::object: {
        od::object obj;
        if (v.get_object().get(obj)) return false;
        size_t first = keys_seen.size();
        uint64_t bits = 0;
        for (auto result : obj) {
          od::field field;
          std::string_view key;
          if (std::move(result).get(field)) return false;
          od::value x = field.value();
          if (!key_of(field, x, exact, key)) return false;
          if (exact && !first_time(key, first, bits)) return false;  // Python keeps one
          if (!walk(x, exact)) return false;
        }
        keys_seen.resize(first);
        return true;
      }
      case od::json_type::array: {
        od::array arr;
        if (v.get_array().get(arr)) return false;
        for (auto item : arr) {
          od::value x;
          if (item.get(x) || !walk(x, exact)) return false;
        }
        return true;
      }
      case od::json_type::number: {
        std::string_view raw = trimmed(v.raw_json_token());
        od::number n;
        if (long_number(raw) || v.get_number().get(n)) return false;  // also beyond 64 bits
        return !exact || canonical_number(n, raw);
      }
      case od::json_type::string: {
        if (exact && !line_escapes) {  // stage 1 has checked all a string without escapes needs
          od::raw_json_string s;
          return !v.get_raw_json_string().get(s);
        }
        std::string_view raw = trimmed(v.raw_json_token());
        bool escaped = std::memchr(raw.data(), '\\', raw.size()) != nullptr;
        if (escaped && exact && !canonical_string(raw)) return false;
        if (escaped && !exact) {
          std::string_view s;  // checks the escapes
          return !v.get_string().get(s);
        }
        od::raw_json_string s;
        return !v.get_raw_json_string().get(s);
      }
      case od::json_type::boolean:
      case od::json_type::null:
        return valid_literal(v, type);
    }
    return false;
  }

  // A key's text (exact: refused when it has an escape). On a compact line without a
  // backslash the key ends two bytes before its value ("key":value): no byte loop.
  bool key_of(od::field& field, od::value& value, bool exact, std::string_view& key) {
    if (exact && !line_escapes) {
      const char* start = field.key().raw();
      const char* next = value.raw_json_token().data();
      if (next - start >= 2 && next[-1] == ':' && next[-2] == '"') {
        key = std::string_view(start, static_cast<size_t>(next - 2 - start));
        return true;
      }
    }
    return key_text(field, key, !exact);
  }

  // False when key is among keys_seen[first:] (an object's keys so far); else adds it.
  bool first_time(std::string_view key, size_t first, uint64_t& bits) {
    uint64_t bit = key_bit(key);
    if (bits & bit) {
      for (size_t k = first; k < keys_seen.size(); ++k)
        if (keys_seen[k] == key) return false;
    }
    bits |= bit;
    keys_seen.push_back(key);
    return true;
  }

  static bool scalar(od::value& v, bool& out) {
    od::json_type type;
    if (v.type().get(type)) return false;
    out = type != od::json_type::object && type != od::json_type::array;
    return true;
  }

  // Copies a block with padding, finds its non-blank lines, blanks a Chrome line's comma.
  // exact: also marks which lines are compact (no whitespace outside strings).
  bool split(const char* data, size_t size, bool jsonl_lines, bool exact) {
    if (buffer.size() < size + simdjson::SIMDJSON_PADDING)
      buffer.resize(size + simdjson::SIMDJSON_PADDING);
    std::memcpy(buffer.data(), data, size);
    std::memset(buffer.data() + size, 0, simdjson::SIMDJSON_PADDING);
    char* base = buffer.data();
    lines.clear();
    for (size_t pos = 0; pos < size;) {
      const void* nl = std::memchr(base + pos, '\n', size - pos);
      size_t stop = nl == nullptr ? size : static_cast<size_t>(static_cast<const char*>(nl) - base);
      size_t a = pos, b = stop;
      pos = stop + 1;
      while (a < b && is_space(base[a])) ++a;
      while (b > a && is_space(base[b - 1])) --b;
      if (a == b) continue;  // a blank line
      if (!jsonl_lines) {
        if (base[b - 1] == ',') {
          base[--b] = ' ';  // a Chrome line's separator
          while (b > a && is_space(base[b - 1])) --b;
        } else if (nl != nullptr && stop + 1 < size) {
          // no comma, yet not the block's last line: not the core's layout (the Python path
          // decides whether more lines follow)
          bool last = true;
          for (size_t k = stop + 1; k < size && last; ++k)
            last = base[k] == '\n' || is_space(base[k]);
          if (!last) return false;
        }
      }
      if (base[a] != '{' || base[b - 1] != '}') return false;
      lines.emplace_back(a, b);
    }
    compact.assign(lines.size(), true);
    if (exact) {
      // A line without whitespace but the newlines is compact. Tabs and carriage returns never
      // stand inside a JSON string (they are escaped there); a space may: a line with a space is
      // minified to see whether any space is outside its strings (the core's own process rows
      // have such spaces, and they are dropped; args keys like "Sequence number" have inner ones).
      if (minified.size() < size + simdjson::SIMDJSON_PADDING)
        minified.resize(size + simdjson::SIMDJSON_PADDING);
      bool tabs =
          std::memchr(base, '\t', size) != nullptr || std::memchr(base, '\r', size) != nullptr;
      for (size_t k = 0; k < lines.size(); ++k) {
        size_t n = lines[k].second - lines[k].first;
        if (!tabs && std::memchr(base + lines[k].first, ' ', n) == nullptr) continue;
        size_t kept = 0;
        if (simdjson::minify(base + lines[k].first, n, minified.data(), kept) != simdjson::SUCCESS)
          return false;
        compact[k] = kept == n;
      }
    }
    return true;
  }

  // The documents of the split block, one per line; calls read(doc, line index) for each.
  template <class Read>
  bool for_each_event(size_t size, Read read) {
    od::document_stream stream;
    if (parser.iterate_many(buffer.data(), size, std::max<size_t>(size, 1 << 16)).get(stream))
      return false;
    size_t k = 0;
    for (auto it = stream.begin(); it != stream.end(); ++it, ++k) {
      od::document_reference doc;
      if ((*it).get(doc)) return false;
      // a document starts its line (the first one's index is the block's start: blanks before)
      size_t at = it.current_index();
      if (k >= lines.size() || (k == 0 ? at > lines[0].first : at != lines[k].first)) return false;
      if (!read(doc, k)) return false;
    }
    return k == lines.size() && stream.truncated_bytes() == 0;
  }

  // One line of the first pass: str(pid) into pids (the last "pid" when repeated, as Python
  // reads it). The core's lines repeat a pid: one whose text is the last one's is known already.
  bool scan_line(od::document_reference& doc, size_t line, bool jsonl_lines) {
    od::object obj;
    if (doc.get_object().get(obj)) return false;
    const char* base = buffer.data();
    // without a backslash on the line, a key's raw text is its text: compared in place
    bool escapes = std::memchr(base + lines[line].first, '\\',
                               lines[line].second - lines[line].first) != nullptr;
    bool fresh = false;
    for (auto result : obj) {
      od::field field;
      if (std::move(result).get(field)) return false;
      bool is_pid, is_ph;
      if (!escapes) {
        is_pid = field.key().unsafe_is_equal("pid");
        is_ph = jsonl_lines && field.key().unsafe_is_equal("ph");
      } else {
        std::string_view key;
        if (!key_text(field, key)) return false;
        is_pid = is(key, "pid");
        is_ph = jsonl_lines && is(key, "ph");
      }
      od::value x = field.value();
      if (is_pid) {
        std::string_view raw = trimmed(x.raw_json_token());
        if (raw == last_pid_raw) {
          fresh = false;
          continue;
        }
        fresh = true;
        od::json_type type;
        if (x.type().get(type)) return false;
        if (type == od::json_type::string) {
          std::string_view text;
          if (x.get_string().get(text)) return false;
          pid.assign(text);
        } else if (type == od::json_type::number) {
          od::number n;
          if (long_number(x.raw_json_token()) || x.get_number().get(n) || n.is_double())
            return false;  // a float: Python's repr
          pid = n.is_int64() ? std::to_string(n.get_int64()) : std::to_string(n.get_uint64());
        } else if (type == od::json_type::boolean) {
          bool b;
          if (x.get_bool().get(b)) return false;
          pid = b ? "True" : "False";
        } else if (type == od::json_type::null) {
          if (!walk(x, false)) return false;
          pid = "None";
        } else {
          return false;  // str() of an object: the Python path
        }
        last_pid_raw.assign(raw);
      } else if (is_ph) {
        if (trimmed(x.raw_json_token()) == "\"footer\"") return false;  // the reader reads it
      }
      // The other values are skipped unread: the second pass reads every line whole and sends
      // a damaged one to the Python loop, which reports it.
    }
    if (fresh) pids.insert(pid);
    return true;
  }

  bool plan_line(od::document_reference& doc, size_t line, LinePlan& plan) {
    const char* base = buffer.data();
    od::object obj;
    if (doc.get_object().get(obj)) return false;
    plan = LinePlan();
    plan.begin = lines[line].first;
    plan.end = lines[line].second;
    // A line with spaces is read only to see whether it is dropped (a process row).
    bool exact = compact[line];
    line_escapes = std::memchr(base + plan.begin, '\\', plan.end - plan.begin) != nullptr;
    std::string_view ph, name, cat = "null", id;
    bool has_pid = false, has_id = false, cat_scalar = true, id_scalar = true;
    keys_seen.clear();
    uint64_t bits = 0;
    for (auto result : obj) {
      od::field field;
      std::string_view key;
      if (std::move(result).get(field)) return false;
      od::value x = field.value();
      if (!key_of(field, x, exact, key)) return false;
      if (!first_time(key, 0, bits)) return false;  // a repeated key: dict(e) keeps one
      size_t top = keys_seen.size();
      bool is_scalar;
      if (!scalar(x, is_scalar)) return false;
      std::string_view raw = is_scalar ? trimmed(x.raw_json_token()) : std::string_view();
      size_t at = is_scalar ? static_cast<size_t>(raw.data() - base) : 0;
      if (is(key, "ts") || is(key, "dur")) {
        od::json_type type;
        if (x.type().get(type)) return false;
        if (type == od::json_type::number) {  // Micros(to_ns(x) (+ shift)), three decimals
          od::number n;
          int64_t ns;
          if (long_number(raw) || x.get_number().get(n) || !to_ns(n, ns)) return false;
          plan.edits[plan.n_edits++] = {at, at + raw.size(), is(key, "ts") ? Edit::kTs : Edit::kDur,
                                        ns};
          continue;
        }
      } else if (is(key, "pid")) {
        if (!is_scalar) return false;  // an object's end is not known here: the Python path
        has_pid = true;
        plan.edits[plan.n_edits++] = {at, at + raw.size(), Edit::kPid, 0};
      } else if (is(key, "ph")) {
        ph = raw;
      } else if (is(key, "name")) {
        name = raw;
      } else if (is(key, "cat")) {
        cat = raw;
        cat_scalar = is_scalar;
      } else if (is(key, "id")) {
        has_id = true;
        id = raw;
        id_scalar = is_scalar;
        if (is_scalar) plan.edits[plan.n_edits++] = {at, at + raw.size(), Edit::kId, 0};
      }
      if (!walk(x, exact)) return false;
      keys_seen.resize(top);
    }
    if (jsonl && ph == "\"footer\"") return false;  // the reader reads the footer
    if (ph == "\"M\"") {
      for (auto row : kProcessRows) plan.skip = plan.skip || name == row;
      if (plan.skip) return true;
    }
    if (!exact) return false;
    plan.append_pid = !has_pid && ph != "\"M\"";
    plan.slice = ph == "\"X\"";
    if (has_id && (ph == "\"s\"" || ph == "\"t\"" || ph == "\"f\"")) {
      if (!cat_scalar || !id_scalar) return false;
      plan.flow_ph = ph[1];
      plan.key_begin = keys.size();
      keys.append(cat);
      keys.push_back('\0');
      keys.append(id);
      plan.key_end = keys.size();
    } else {
      // not renumbered: the id is copied as it is
      int kept = 0;
      for (int k = 0; k < plan.n_edits; ++k)
        if (plan.edits[k].kind != Edit::kId) plan.edits[kept++] = plan.edits[k];
      plan.n_edits = kept;
    }
    std::sort(plan.edits, plan.edits + plan.n_edits,
              [](const Edit& a, const Edit& b) { return a.begin < b.begin; });
    return true;
  }

  int64_t flow_id(std::string_view key, char ph) {
    auto it = flows.find(std::string(key));
    if (it == flows.end()) it = flows.emplace(std::string(key), Flow{++next_flow, 0}).first;
    int64_t id = it->second.id;
    if (ph == 's') it->second.ends |= 1;
    if (ph == 'f') it->second.ends |= 2;
    if (it->second.ends == 3) flows.erase(it);  // both ends written: the id is not needed again
    return id;
  }

  void write(const LinePlan& plan, std::string& out) {
    const char* base = buffer.data();
    out.append(",\n");
    size_t pos = plan.begin;
    for (int k = 0; k < plan.n_edits; ++k) {
      const Edit& e = plan.edits[k];
      out.append(base + pos, e.begin - pos);
      switch (e.kind) {
        case Edit::kPid:
          out.append(rank_text);
          break;
        case Edit::kTs:
          append_us(out, e.ns + shift);
          break;
        case Edit::kDur:
          append_us(out, e.ns);
          break;
        case Edit::kId:
          append_int(out, flow_id(std::string_view(keys).substr(plan.key_begin,
                                                                plan.key_end - plan.key_begin),
                                  plan.flow_ph));
          break;
      }
      pos = e.end;
    }
    if (plan.append_pid) {  // dict order: a new key goes last
      out.append(base + pos, plan.end - 1 - pos);
      out.append(plan.end - plan.begin > 2 ? ",\"pid\":" : "\"pid\":");
      out.append(rank_text);
      out.push_back('}');
    } else {
      out.append(base + pos, plan.end - pos);
    }
  }
};

MergeEngine::MergeEngine() : state_(std::make_unique<State>()) {}
MergeEngine::~MergeEngine() = default;

bool MergeEngine::scan_block(const char* data, size_t size, bool jsonl, long* events) {
  State& s = *state_;
  *events = 0;
  if (!s.split(data, size, jsonl, false)) return false;
  bool ok = s.for_each_event(size, [&](od::document_reference& doc, size_t line) {
    return s.scan_line(doc, line, jsonl);
  });
  if (ok) *events = static_cast<long>(s.lines.size());
  return ok;
}

std::vector<std::string> MergeEngine::take_pids() {
  std::vector<std::string> out(state_->pids.begin(), state_->pids.end());
  state_->pids.clear();
  state_->last_pid_raw = "\x01";
  return out;
}

void MergeEngine::start_rank(int64_t rank, int64_t shift_ns, bool jsonl) {
  state_->rank_text = std::to_string(rank);
  state_->shift = shift_ns;
  state_->jsonl = jsonl;
  state_->flows.clear();
}

bool MergeEngine::rewrite_block(const char* data, size_t size, std::string& out, long* read,
                                long* written, long* slices) {
  State& s = *state_;
  *read = *written = *slices = 0;
  if (!s.split(data, size, s.jsonl, true)) return false;
  s.keys.clear();
  s.plans.resize(s.lines.size());
  if (!s.for_each_event(size, [&](od::document_reference& doc, size_t line) {
        return s.plan_line(doc, line, s.plans[line]);
      }))
    return false;
  for (const LinePlan& plan : s.plans) {  // every line can be rewritten: now the state changes
    if (plan.skip) continue;
    s.write(plan, out);
    *written += 1;
    *slices += plan.slice;
  }
  *read = static_cast<long>(s.lines.size());
  return true;
}

int64_t MergeEngine::flow(std::string_view key, char ph) { return state_->flow_id(key, ph); }

}  // namespace fqntrace::analysis

#include "exporters/event_lines.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "exporters/common_length.h"
#include "exporters/json_text.h"

namespace fqntrace::json {
namespace {

constexpr size_t kFirstSlots = 256;
// Beyond this many combinations (or this much text) the cache starts over rather than grow: a
// program that names its ranges without end (record_function(f"step {i}")) must not make the
// drain's memory grow with it.
constexpr size_t kMaxSlots = 1 << 16;
constexpr size_t kMaxText = 16 << 20;
// Room for everything of an event but its cached text and its shapes: numbers, keys, the two
// flow objects, separators.
constexpr size_t kNumbersRoom = 768;

template <size_t N>
inline char* put(char* p, const char (&literal)[N]) {
  std::memcpy(p, literal, N - 1);
  return p + N - 1;
}

inline char* put(char* p, const std::string& s) {
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}

// Depths, most durations' whole microseconds and small ids are one digit: no call for those.
inline char* put_uint(char* p, uint64_t v) {
  if (v < 10) {
    *p = static_cast<char>('0' + v);
    return p + 1;
  }
  return std::to_chars(p, p + 20, v).ptr;
}

inline char* put_int(char* p, int64_t v) { return std::to_chars(p, p + 21, v).ptr; }

// ".000" … ".999": a time's fraction is one 4-byte copy instead of three divisions.
struct Fractions {
  char text[1000][4];
  constexpr Fractions() : text() {
    for (int i = 0; i < 1000; ++i) {
      text[i][0] = '.';
      text[i][1] = static_cast<char>('0' + i / 100);
      text[i][2] = static_cast<char>('0' + i / 10 % 10);
      text[i][3] = static_cast<char>('0' + i % 10);
    }
  }
};
constexpr Fractions kFractions;

// As append_us: microseconds with three decimals.
inline char* put_us(char* p, uint64_t ns) {
  p = put_uint(p, ns / 1000);
  std::memcpy(p, kFractions.text[ns % 1000], 4);
  return p + 4;
}

// The separator goes before every line but a writer's first (begin_line).
struct Separator {
  const char* text;
  size_t len;
  char head[2];  // its first two bytes: copied with one fixed-size store when len <= 2
};

inline char* put_separator(char* p, const Separator& separator, bool* first) {
  if (!*first) {
    if (separator.len <= 2) {
      std::memcpy(p, separator.head, 2);  // the room after p is ample (kNumbersRoom)
    } else {
      std::memcpy(p, separator.text, separator.len);
    }
    p += separator.len;
  }
  *first = false;
  return p;
}

inline size_t hash(uint32_t a, uint32_t b, uint32_t c, uint32_t d, uint32_t e) {
  uint64_t h = (static_cast<uint64_t>(a) << 32 | b) * 0x9E3779B97F4A7C15ull;
  h ^= (static_cast<uint64_t>(c) << 32 | d) * 0xC2B2AE3D27D4EB4Full;
  h ^= e * 0x165667B19E3779F9ull;
  return static_cast<size_t>(h ^ (h >> 29));
}

}  // namespace

EventLines::EventLines(long pid, GzipStream* gzip)
    : pid_value_(pid),
      pid_(std::to_string(pid)),
      flow_pid_(",\"pid\":" + pid_ + ",\"tid\":"),
      flow_bp_pid_(",\"bp\":\"e\",\"pid\":" + pid_ + ",\"tid\":"),
      scratch_(4096, '\0'),
      gzip_(gzip) {
  clear();
}

void EventLines::clear() {
  last_ = nullptr;
  slots_.assign(kFirstSlots, Slot{});
  used_ = 0;
  text_.clear();
  head_marks_.clear();
  args_marks_.clear();
}

void EventLines::share_marks(Slot& s) {
  if (gzip_ == nullptr) return;
  s.head_mark = &head_marks_[text_.substr(s.head_at, s.head_len)];
  s.args_mark = &args_marks_[text_.substr(s.args_at, s.args_len)];
}

void EventLines::grow() {
  last_ = nullptr;  // the slots move
  std::vector<Slot> old(slots_.size() * 2);
  old.swap(slots_);
  size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (!s.used) continue;
    size_t i = hash(s.key.name_id, s.key.fqn_id, s.key.type_id, s.key.tid,
                    s.key.phase << 8 | s.key.category) &
               mask;
    while (slots_[i].used) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

EventLines::Slot& EventLines::slot(const Key& key, const EventRecord& e) {
  // The same combination as the last event (a loop of one op, a run of one op on one thread):
  // no hash.
  if (last_ != nullptr && last_->key == key) return *last_;
  size_t mask = slots_.size() - 1;
  size_t i =
      hash(key.name_id, key.fqn_id, key.type_id, key.tid, key.phase << 8 | key.category) & mask;
  for (; slots_[i].used; i = (i + 1) & mask) {
    if (slots_[i].key == key) return *(last_ = &slots_[i]);
  }
  // A new combination: its text, escaped once, by the same routines append_event uses.
  if (used_ + 1 > kMaxSlots / 2 || text_.size() > kMaxText) {
    clear();
    return slot(key, e);
  }
  if (2 * (used_ + 1) > slots_.size()) {
    grow();
    return slot(key, e);
  }
  Slot& s = slots_[i];
  last_ = &s;
  s.key = key;
  s.used = true;
  ++used_;
  s.head_at = static_cast<uint32_t>(text_.size());
  text_ += key.category == kCpuOp ? "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":"
           : key.category == kModuleSpanLine
               ? "{\"ph\":\"X\",\"cat\":\"module_span\",\"name\":"
               : "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":";
  append_string(text_, e.name);
  text_ += ",\"pid\":";
  text_ += pid_;
  text_ += ",\"tid\":";
  append_uint(text_, e.tid);
  text_ += ",\"ts\":";
  s.head_len = static_cast<uint32_t>(text_.size() - s.head_at);
  s.args_at = static_cast<uint32_t>(text_.size());
  text_ += ",\"args\":{\"fqn\":";
  append_string(text_, e.fqn);
  text_ += ",\"phase\":\"";
  text_ += phase_name(e.raw.phase);
  text_ += "\"";
  // A module's type always; a span's when its module was seen (json::append_module_span).
  if (e.raw.kind == EventKind::kModule ||
      (e.raw.kind == EventKind::kModuleSpan && !e.module_type.empty())) {
    text_ += ",\"module_type\":";
    append_string(text_, e.module_type);
  }
  s.args_len = static_cast<uint32_t>(text_.size() - s.args_at);
  share_marks(s);
  return s;
}

void EventLines::append(std::string& out, const EventRecord& e, const char* separator,
                        bool* first) {
  const RawEvent& raw = e.raw;
  const Range& r = raw.range;
  switch (raw.kind) {
    case EventKind::kOp:
    case EventKind::kNode:
    case EventKind::kEngineEval:
    case EventKind::kModule:
    case EventKind::kUserScope:
    case EventKind::kModuleSpan:
      break;
    default:  // collectives (rare) and kinds this writer does not know
      append_event(out, e, pid_value_, separator, first);
      return;
  }
  const bool typed = raw.kind == EventKind::kModule || raw.kind == EventKind::kModuleSpan;
  Key key{r.name_id,
          r.fqn_id,
          typed ? r.module.type_id : 0,
          e.tid,
          static_cast<uint8_t>(raw.phase),
          raw.kind == EventKind::kModuleSpan ? kModuleSpanLine
          : is_cpu_op(raw)                   ? kCpuOp
                                             : kUserAnnotation};
  Slot& s = slot(key, e);
  if (separator != separator_) {  // a writer passes the same literal every time
    separator_ = separator;
    separator_len_ = std::strlen(separator);
  }
  const Separator sep{
      separator, separator_len_, {separator[0], separator_len_ > 1 ? separator[1] : '\0'}};

  size_t shapes_room = e.input_dims != nullptr ? e.input_dims->size() + e.input_types->size() : 0;
  // Formatted into scratch_ (which only ever grows), then appended at once: resizing `out` for
  // the worst case would fill hundreds of bytes with zeros per event.
  size_t room = s.head_len + s.args_len + shapes_room + kNumbersRoom;
  if (scratch_.size() < room) scratch_.resize(room);
  char* const begin = &scratch_[0];
  const size_t base = out.size();
  GzipStream* const gz = gzip_;
  // Text written before, announced to the compressor (a back-reference instead of its bytes).
  auto known = [&](char* p, const char* text, size_t len, uint64_t* mark) {
    if (gz != nullptr) gz->repeat(base + static_cast<size_t>(p - begin), len, mark);
    std::memcpy(p, text, len);
    return p + len;
  };
  char* p = put_separator(begin, sep, first);
  const bool separated = p != begin;
  std::memcpy(p, text_.data() + s.head_at, s.head_len);
  p += s.head_len;
  char* const ts = p;
  p = put_us(p, e.ts_ns);
  if (gz != nullptr && separated) {
    // The separator, the head and the digits the time shares with this slot's previous one (the
    // text at head_mark): one repeat.
    HeadMark& h = *s.head_mark;
    size_t ts_len = static_cast<size_t>(p - ts);
    size_t same = 0;
    if (h.mark != 0) same = common_length(ts, h.last_ts, std::min<size_t>(ts_len, h.last_ts_len));
    gz->repeat(base, static_cast<size_t>(ts - begin) + same, &h.mark);
    // Fixed-size copies: scratch_ has room past the time (kNumbersRoom), and a time is at most
    // 24 characters (20 digits, a point, three decimals).
    std::memcpy(h.last_ts, ts, sizeof h.last_ts);
    h.last_ts_len = static_cast<uint8_t>(ts_len);
  }
  p = known(p, ",\"dur\":", 7, &marks_.dur);
  p = put_us(p, e.dur_ns);
  p = known(p, text_.data() + s.args_at, s.args_len, s.args_mark);
  if (r.seq >= 0) {
    p = known(p, ",\"Sequence number\":", 19, &marks_.seq);
    p = put_int(p, r.seq);
  }
  if (raw.kind == EventKind::kNode || raw.kind == EventKind::kEngineEval) {
    p = known(p, ",\"Fwd thread id\":", 17, &marks_.fwd_tid);
    p = put_uint(p, r.node.fwd_thread_id);
  } else if (raw.kind == EventKind::kModuleSpan) {
    if (r.module.node_ns != 0) {  // as json::append_module_span writes it
      p = known(p, ",\"node_ns\":", 11, &marks_.node_ns);
      p = put_uint(p, r.module.node_ns);
    }
  } else if (raw.kind == EventKind::kOp) {
    if (r.op.flops != 0) {
      p = known(p, ",\"flops\":", 9, &marks_.flops);
      p = put_uint(p, r.op.flops);
    }
    if (r.op.alloc_bytes != 0) {  // as json::append_op_memory writes it
      p = known(p, ",\"alloc_bytes\":", 15, &marks_.alloc);
      p = put_uint(p, r.op.alloc_bytes);
    }
  }
  if ((raw.flags & kHasCpu) != 0) {  // as json::append_event writes it
    p = known(p, ",\"self_cpu_ns\":", 15, &marks_.cpu);
    p = put_uint(p, uint64_t{raw.self_cpu} * kCpuUnitNs);
  }
  if (raw.kind == EventKind::kOp && (raw.flags & kStackDepth) != 0) {  // as json::append_event
    p = known(p, ",\"stack_depth\":", 15, &marks_.stack);
    p = put_uint(p, raw.self_cpu);
  }
  if (e.input_dims != nullptr) {
    p = known(p, ",\"Input Dims\":", 14, &marks_.dims);
    p = put(p, *e.input_dims);
    p = known(p, ",\"Input type\":", 14, &marks_.types);
    p = put(p, *e.input_types);
  }
  if (r.rf_id != 0) {  // only while torch.profiler records (buffer/event.h)
    p = put(p, ",\"Record function id\":");
    p = put_uint(p, r.rf_id);
  }
  if (raw.depth < 10) {
    char depth_end[] = ",\"depth\":0}}";
    depth_end[9] = static_cast<char>('0' + raw.depth);
    p = known(p, depth_end, sizeof depth_end - 1, &marks_.depth_end[raw.depth]);
  } else {
    p = known(p, ",\"depth\":", 9, &marks_.depth);
    p = put_uint(p, raw.depth);
    p = put(p, "}}");
  }

  if (e.flow_id != 0) {
    p = put_separator(p, sep, first);
    static constexpr char kFlowS[] = "{\"ph\":\"s\",\"cat\":\"fwdbwd\",\"name\":\"fwdbwd\",\"id\":";
    p = known(p, kFlowS, sizeof kFlowS - 1, &marks_.flow_s);
    p = put_uint(p, e.flow_id);
    p = known(p, flow_pid_.data(), flow_pid_.size(), &marks_.flow_pid);
    p = put_uint(p, r.node.flow_src_tid);
    p = known(p, ",\"ts\":", 6, &marks_.flow_ts);
    p = put_us(p, e.flow_src_ts_ns);
    p = put(p, "}");
    p = put_separator(p, sep, first);
    static constexpr char kFlowF[] = "{\"ph\":\"f\",\"cat\":\"fwdbwd\",\"name\":\"fwdbwd\",\"id\":";
    p = known(p, kFlowF, sizeof kFlowF - 1, &marks_.flow_f);
    p = put_uint(p, e.flow_id);
    p = known(p, flow_bp_pid_.data(), flow_bp_pid_.size(), &marks_.flow_tid);
    p = put_uint(p, e.tid);
    p = known(p, ",\"ts\":", 6, &marks_.flow_ts);
    p = put_us(p, e.ts_ns);
    p = put(p, "}");
  }
  out.append(begin, static_cast<size_t>(p - begin));
}

}  // namespace fqntrace::json

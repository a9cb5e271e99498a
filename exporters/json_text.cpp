#include "exporters/json_text.h"

#include <charconv>

#include "exporters/memory_json.h"

namespace fqntrace::json {
namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if it is not valid.
size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  }
  if (n == 3 && c == 0xE0 && byte(i + 1) < 0xA0) return 0;   // overlong
  if (n == 3 && c == 0xED && byte(i + 1) >= 0xA0) return 0;  // surrogate
  if (n == 4 && c == 0xF0 && byte(i + 1) < 0x90) return 0;   // overlong
  if (n == 4 && c == 0xF4 && byte(i + 1) >= 0x90) return 0;  // > U+10FFFF
  return n;
}

// Printable ASCII other than the quote and the backslash: written as it is.
inline bool is_plain(char ch) {
  unsigned char c = static_cast<unsigned char>(ch);
  return c >= 0x20 && c < 0x7F && c != '"' && c != '\\';
}

const char* category(const RawEvent& e) { return is_cpu_op(e) ? "cpu_op" : "user_annotation"; }

}  // namespace

void begin_line(std::string& out, const char* separator, bool* first) {
  if (!*first) out += separator;
  *first = false;
}

void append_string(std::string& out, std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (size_t i = 0; i < s.size();) {
    // The common case: a run of printable ASCII that needs no escaping, appended at once.
    size_t plain = i;
    while (plain < s.size() && is_plain(s[plain])) ++plain;
    if (plain != i) {
      out.append(s.data() + i, plain - i);
      i = plain;
      continue;
    }
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      size_t n = utf8_sequence_length(s, i);
      if (n == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(s.data() + i, n);
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:  // the other control characters and DEL
        out += "\\u00";
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 0xF]);
    }
    ++i;
  }
  out.push_back('"');
}

void append_int(std::string& out, int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, static_cast<size_t>(r.ptr - buf));  // (pointer, length): the cheap append
}

void append_uint(std::string& out, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, static_cast<size_t>(r.ptr - buf));  // (pointer, length): the cheap append
}

void append_us(std::string& out, uint64_t ns) {
  append_uint(out, ns / 1000);
  uint64_t frac = ns % 1000;
  char buf[4] = {'.', static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                 static_cast<char>('0' + frac % 10)};
  out.append(buf, 4);
}

void append_slice_head(std::string& out, std::string_view cat, const std::string& name, long pid,
                       uint32_t tid, uint64_t ts_ns, uint64_t dur_ns, const std::string& fqn) {
  out += "{\"ph\":\"X\",\"cat\":";
  append_string(out, cat);
  out += ",\"name\":";
  append_string(out, name);
  out += ",\"pid\":";
  append_int(out, pid);
  out += ",\"tid\":";
  append_uint(out, tid);
  out += ",\"ts\":";
  append_us(out, ts_ns);
  out += ",\"dur\":";
  append_us(out, dur_ns);
  out += ",\"args\":{\"fqn\":";
  append_string(out, fqn);
}

void append_event(std::string& out, const EventRecord& e, long pid, const char* separator,
                  bool* first) {
  const RawEvent& raw = e.raw;
  const Range& r = raw.range;
  begin_line(out, separator, first);
  append_slice_head(out, category(raw), e.name, pid, e.tid, e.ts_ns, e.dur_ns, e.fqn);
  out += ",\"phase\":\"";
  out += phase_name(raw.phase);
  out += "\"";
  if (raw.kind == EventKind::kModule) {
    out += ",\"module_type\":";
    append_string(out, e.module_type);
  }
  if (r.seq >= 0) {
    out += ",\"Sequence number\":";
    append_int(out, r.seq);
  }
  switch (raw.kind) {
    case EventKind::kNode:
    case EventKind::kEngineEval:
      out += ",\"Fwd thread id\":";
      append_uint(out, r.node.fwd_thread_id);
      break;
    case EventKind::kCollective:
      out += ",\"collective\":";
      append_string(out, e.collective);
      out += ",\"bytes\":";
      append_uint(out, r.collective.bytes);
      out += ",\"group_size\":";
      append_uint(out, r.collective.group_size);
      if ((raw.flags & kCollectiveWork) != 0) out += ",\"async_work\":true";
      break;
    case EventKind::kOp:
      if (r.op.flops != 0) {
        out += ",\"flops\":";
        append_uint(out, r.op.flops);
      }
      append_op_memory(out, r.op);
      break;
    default:
      break;
  }
  if ((raw.flags & kHasCpu) != 0) {
    out += ",\"self_cpu_ns\":";  // an integer: the same text whatever reads and rewrites it
    append_uint(out, uint64_t{raw.self_cpu} * kCpuUnitNs);
  }
  if (raw.kind == EventKind::kOp && (raw.flags & kStackDepth) != 0) {
    out += ",\"stack_depth\":";
    append_uint(out, raw.self_cpu);
  }
  if (e.input_dims != nullptr) {
    out += ",\"Input Dims\":";
    out += *e.input_dims;
    out += ",\"Input type\":";
    out += *e.input_types;
  }
  if (r.rf_id != 0) {  // only while torch.profiler records (buffer/event.h)
    out += ",\"Record function id\":";
    append_uint(out, r.rf_id);
  }
  out += ",\"depth\":";
  append_uint(out, raw.depth);
  out += "}}";

  if (e.flow_id != 0) {
    begin_line(out, separator, first);
    out += "{\"ph\":\"s\",\"cat\":\"fwdbwd\",\"name\":\"fwdbwd\",\"id\":";
    append_uint(out, e.flow_id);
    out += ",\"pid\":";
    append_int(out, pid);
    out += ",\"tid\":";
    append_uint(out, r.node.flow_src_tid);
    out += ",\"ts\":";
    append_us(out, e.flow_src_ts_ns);
    out += "}";
    begin_line(out, separator, first);
    out += "{\"ph\":\"f\",\"cat\":\"fwdbwd\",\"name\":\"fwdbwd\",\"id\":";
    append_uint(out, e.flow_id);
    out += ",\"bp\":\"e\",\"pid\":";
    append_int(out, pid);
    out += ",\"tid\":";
    append_uint(out, e.tid);
    out += ",\"ts\":";
    append_us(out, e.ts_ns);
    out += "}";
  }
}

namespace {

// A metadata line up to its args' first key: {"ph":"M","name":"<name>","pid":P,"tid":T,"args":{
void begin_metadata(std::string& out, const char* name, long pid, uint32_t tid,
                    const char* separator, bool* first) {
  begin_line(out, separator, first);
  out += "{\"ph\":\"M\",\"name\":\"";
  out += name;
  out += "\",\"pid\":";
  append_int(out, pid);
  out += ",\"tid\":";
  append_uint(out, tid);
  out += ",\"args\":{";
}

}  // namespace

void append_thread_name(std::string& out, long pid, uint32_t tid, const std::string& name,
                        const char* separator, bool* first) {
  begin_metadata(out, "thread_name", pid, tid, separator, first);
  out += "\"name\":";
  append_string(out, name);
  out += "}}";
}

void append_module_entry(std::string& out, long pid, const std::string& fqn,
                         const std::string& module_type, const std::string& parent,
                         const char* separator, bool* first) {
  begin_metadata(out, "fqntrace_module", pid, 0, separator, first);
  out += "\"fqn\":";
  append_string(out, fqn);
  out += ",\"module_type\":";
  append_string(out, module_type);
  if (!parent.empty()) {
    out += ",\"parent\":";
    append_string(out, parent);
  }
  out += "}}";
}

void append_process_name(std::string& out, long pid, const std::string& name, int rank,
                         const char* separator, bool* first, size_t* labels_offset) {
  begin_line(out, separator, first);
  out += "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":";
  append_int(out, pid);
  out += ",\"tid\":0, \"args\":{\"name\":";
  append_string(out, name);
  out += "}}";
  begin_line(out, separator, first);
  out += "{\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":";
  append_int(out, pid);
  out += ",\"tid\":0, \"args\":{\"labels\":";
  if (labels_offset != nullptr) *labels_offset = out.size();
  out += labels_slot(rank);
  out += "}}";
}

std::string labels_slot(int rank) {
  std::string value;
  append_string(value, "rank " + std::to_string(rank));
  value.resize(kLabelsSlot, ' ');
  return value;
}

std::string distributed_slot(const TraceInfo& info) {
  std::string value = "\"backend\": ";
  const size_t numbers_room = 2 * 11 + sizeof(", \"rank\": , \"world_size\": ") - 1;
  if (info.backend.empty() ||
      value.size() + info.backend.size() + 2 + numbers_room > kDistributedSlot) {
    value += "null";  // unknown, or too long to fit (never seen: "cpu:gloo,cuda:nccl" fits)
  } else {
    append_string(value, info.backend);
  }
  value += ", \"rank\": ";
  append_int(value, info.rank);
  value += ", \"world_size\": ";
  append_int(value, info.world_size);
  value.resize(kDistributedSlot, ' ');
  return value;
}

void append_sample(std::string& out, const TraceInfo& info) {
  if (!(info.sample < 1.0)) return;
  char text[32];
  auto result = std::to_chars(text, text + sizeof(text), info.sample);
  out += ", \"sample\": ";
  out.append(text, result.ptr);
  if (info.sample_spans) out += ", \"sampleNodeSpans\": true";
}

void append_capture(std::string& out, const TraceInfo& info) {
  if (info.capture_json.empty()) return;
  out += ", \"capture\": ";
  out += info.capture_json;
}

void append_device(std::string& out, const DeviceUse& device) {
  if (!device.known) return;
  if (!device.used) {
    out += ", \"device\": {\"used\": false";
  } else {
    out += ", \"device\": {\"used\": true, \"type\": ";
    append_string(out, device.type);
    out += ", \"count\": ";
    append_int(out, device.count);
  }
  if (device.collect) {  // FQNTRACE_DEVICE
    out += ", \"collected\": {\"recordings\": ";
    append_uint(out, device.recordings);
    out += ", \"events\": ";
    append_uint(out, device.collected);
    out += ", \"not_attributed\": ";
    append_uint(out, device.not_attributed);
    out += ", \"ops\": ";
    append_uint(out, device.ops);
    out += ", \"ops_joined\": ";
    append_uint(out, device.ops_joined);
    if (!device.collect_off.empty()) {
      out += ", \"off\": ";
      append_string(out, device.collect_off);
    }
    out += "}";
  }
  out += "}";
}

void append_distributed_info(std::string& out, const TraceInfo& info, size_t* slot_offset) {
  out += "\"distributedInfo\": {";
  if (slot_offset != nullptr) *slot_offset = out.size();
  out += distributed_slot(info);
  out += "}";
}

}  // namespace fqntrace::json

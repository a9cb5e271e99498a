#include "exporters/memory_json.h"

#include "exporters/json_text.h"

namespace fqntrace::json {

std::string device_label(int8_t type, int8_t index) {
  // c10::DeviceType values (torch/headeronly/core/DeviceType.h) of devices that report memory.
  std::string name;
  switch (type) {
    case 0:
      name = "cpu";
      break;
    case 1:
      name = "cuda";
      break;
    case 6:
      name = "hip";
      break;
    case 9:
      name = "xla";
      break;
    case 12:
      name = "xpu";
      break;
    case 13:
      name = "mps";
      break;
    case 15:
      name = "hpu";
      break;
    case 19:
      name = "mtia";
      break;
    case 20:
      name = "privateuseone";
      break;
    default:
      name = "device" + std::to_string(type);
      break;
  }
  if (index >= 0) name += ":" + std::to_string(index);
  return name;
}

void append_memory_event(std::string& out, const EventRecord& e, long pid, const char* separator,
                         bool* first) {
  const RawEvent& raw = e.raw;
  const MemorySample& m = raw.memory;
  begin_line(out, separator, first);
  out += "{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"s\":\"t\",\"name\":\"[memory]\",\"pid\":";
  append_int(out, pid);
  out += ",\"tid\":";
  append_uint(out, e.tid);
  out += ",\"ts\":";
  append_us(out, e.ts_ns);
  out += ",\"args\":{\"Total Reserved\":";
  append_uint(out, m.total_reserved);
  out += ",\"Total Allocated\":";
  append_uint(out, m.total_allocated);
  out += ",\"Bytes\":";
  append_int(out, m.bytes);
  out += ",\"Addr\":";
  append_uint(out, m.ptr);
  out += ",\"Device Type\":";
  append_int(out, m.device_type);
  out += ",\"Device Id\":";
  append_int(out, m.device_index);
  out += ",\"fqn\":";
  append_string(out, e.fqn);
  out += ",\"phase\":\"";
  out += phase_name(raw.phase);
  out += "\"";
  if (raw.flags & kMemGrad) out += ",\"grad\":true";
  out += ",\"depth\":";
  append_uint(out, raw.depth);
  out += "}}";
  begin_line(out, separator, first);
  out += "{\"ph\":\"C\",\"name\":\"Allocated bytes\",\"pid\":";
  append_int(out, pid);
  out += ",\"ts\":";
  append_us(out, e.ts_ns);
  out += ",\"args\":{";
  append_string(out, device_label(m.device_type, m.device_index));
  out += ":";
  append_uint(out, m.total_allocated);
  out += "}}";
}

void append_op_memory(std::string& out, const OpPayload& op) {
  if (op.alloc_bytes == 0) return;
  out += ",\"alloc_bytes\":";
  append_uint(out, op.alloc_bytes);
}

}  // namespace fqntrace::json

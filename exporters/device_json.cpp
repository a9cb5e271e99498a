#include "exporters/device_json.h"

#include "exporters/json_text.h"

namespace fqntrace::json {

void append_device_event(std::string& out, const DeviceEventRecord& e, long pid,
                         const char* separator, bool* first) {
  begin_line(out, separator, first);
  append_slice_head(out, e.cat, e.name, pid, e.tid, e.ts_ns, e.dur_ns, e.fqn);
  out += ",\"phase\":";
  append_string(out, e.phase);
  out += ",\"device\":";
  append_int(out, e.device);
  out += ",\"stream\":";
  append_int(out, e.stream);
  if (e.correlation >= 0) {
    out += ",\"correlation\":";
    append_int(out, e.correlation);
  }
  if (e.external_id >= 0) {
    out += ",\"External id\":";
    append_int(out, e.external_id);
  }
  out += "}}";
}

}  // namespace fqntrace::json

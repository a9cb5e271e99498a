#include "exporters/module_span_json.h"

#include "exporters/json_text.h"

namespace fqntrace::json {

void append_module_span(std::string& out, const EventRecord& e, long pid, const char* separator,
                        bool* first) {
  begin_line(out, separator, first);
  append_slice_head(out, "module_span", e.name, pid, e.tid, e.ts_ns, e.dur_ns, e.fqn);
  out += ",\"phase\":\"";
  out += phase_name(e.raw.phase);
  out += "\"";
  if (!e.module_type.empty()) {
    out += ",\"module_type\":";
    append_string(out, e.module_type);
  }
  if (e.raw.range.module.node_ns != 0) {  // a sampled trace's backward span: its nodes' time
    out += ",\"node_ns\":";
    append_uint(out, e.raw.range.module.node_ns);
  }
  out += ",\"depth\":";
  append_uint(out, e.raw.depth);
  out += "}}";
}

}  // namespace fqntrace::json

// JSON Lines: one JSON object per line — a header line, the same event objects as the Chrome
// trace, and a footer line at normal exit. Every complete line stays readable after a crash.
#include "exporters/event_stream_exporter.h"

namespace fqntrace {
namespace {

class JsonLinesExporter final : public EventStreamExporter {
 protected:
  void append_header(std::string& head, const TraceInfo& info,
                     size_t* distributed_offset) override {
    head += "{\"ph\": \"header\", \"schemaVersion\": 1, ";
    json::append_distributed_info(head, info, distributed_offset);
    head += ", \"baseTimeNanoseconds\": ";
    json::append_uint(head, info.base_time_ns);
    json::append_sample(head, info);
    json::append_capture(head, info);
    head += ", \"traceName\": ";
    json::append_string(head, info.trace_name);
    head += "}\n";
  }

  const char* separator() const override { return "\n"; }

  void append_tail(std::string& tail, const FinishInfo& fin) override {
    tail += "\n{\"ph\": \"footer\", \"events\": ";
    json::append_uint(tail, fin.events_written);
    tail += ", \"dropped_events\": ";
    json::append_uint(tail, fin.dropped_events);
    if (info().memory) tail += ", \"memory\": true";
    json::append_device(tail, fin.device);
    tail += ", \"complete\": true}\n";
  }
};

}  // namespace

std::unique_ptr<Exporter> make_json_lines_exporter() {
  return std::make_unique<JsonLinesExporter>();
}

}  // namespace fqntrace

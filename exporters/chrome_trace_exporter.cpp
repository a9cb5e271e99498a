// Chrome / Perfetto trace in Kineto's object form. Streams: the header and the opening of
// "traceEvents" are written at open, one event per line as events arrive, and the closing tail
// at finish. A file cut off by a crash is therefore complete up to its last full line, which is
// what `python -m fqntrace repair` relies on.
#include "exporters/event_stream_exporter.h"

namespace fqntrace {
namespace {

class ChromeTraceExporter final : public EventStreamExporter {
 protected:
  void append_header(std::string& head, const TraceInfo& info,
                     size_t* distributed_offset) override {
    head += "{\"schemaVersion\": 1, ";
    json::append_distributed_info(head, info, distributed_offset);
    head += ", \"baseTimeNanoseconds\": ";
    json::append_uint(head, info.base_time_ns);
    json::append_sample(head, info);
    json::append_capture(head, info);
    head += ", \"displayTimeUnit\": \"ms\", \"traceName\": ";
    json::append_string(head, info.trace_name);
    head += ", \"traceEvents\": [\n";
  }

  const char* separator() const override { return ",\n"; }

  void append_tail(std::string& tail, const FinishInfo& fin) override {
    tail += "\n], \"fqntrace\": {\"version\": ";
    json::append_string(tail, info().version);
    tail += ", \"events\": ";
    json::append_uint(tail, fin.events_written);
    tail += ", \"dropped_events\": ";
    json::append_uint(tail, fin.dropped_events);
    if (info().memory) tail += ", \"memory\": true";
    json::append_device(tail, fin.device);
    tail += ", \"complete\": true}}\n";
  }
};

}  // namespace

std::unique_ptr<Exporter> make_chrome_trace_exporter() {
  return std::make_unique<ChromeTraceExporter>();
}

}  // namespace fqntrace

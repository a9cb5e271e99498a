// Chrome / Perfetto trace in Kineto's object form. Streams: the header and the opening of
// "traceEvents" are written at open, one event per line as events arrive, and the closing tail
// at finish. A file cut off by a crash is therefore complete up to its last full line, which is
// what `python -m fqntrace repair` relies on.
#include "exporters/exporter.h"
#include "exporters/json_text.h"

namespace fqntrace {
namespace {

constexpr const char* kSeparator = ",\n";

class ChromeTraceExporter final : public Exporter {
 public:
  const char* format_name() const override { return "chrome"; }

  bool open(const TraceInfo& info, std::string* error) override {
    info_ = info;
    if (!file_.open(info.path, error)) return false;
    std::string head = "{\"schemaVersion\": 1, ";
    json::append_distributed_info(head, info, &backend_offset_);
    head += ", \"baseTimeNanoseconds\": ";
    json::append_uint(head, info.base_time_ns);
    head += ", \"displayTimeUnit\": \"ms\", \"traceName\": ";
    json::append_string(head, info.trace_name);
    head += ", \"traceEvents\": [\n";
    json::append_process_name(head, info.pid, info.process_name, info.rank, kSeparator, &first_);
    file_.write(head);
    return file_.flush(error);  // the header reaches the file at once: a crash leaves a repairable file
  }

  void thread_seen(uint32_t tid, const std::string& thread_name) override {
    line_.clear();
    json::append_thread_name(line_, info_.pid, tid, thread_name, kSeparator, &first_);
    file_.write(line_);
  }

  void event(const EventRecord& e) override {
    line_.clear();
    json::append_event(line_, e, info_.pid, kSeparator, &first_);
    file_.write(line_);
  }

  void backend_known(const std::string& backend) override {
    file_.patch(backend_offset_, json::backend_slot(backend));
  }

  bool flush(std::string* error) override { return file_.flush(error); }

  bool finish(const FinishInfo& fin, std::string* error) override {
    std::string tail = "\n], \"fqntrace\": {\"version\": ";
    json::append_string(tail, info_.version);
    tail += ", \"events\": ";
    json::append_uint(tail, fin.events_written);
    tail += ", \"dropped_events\": ";
    json::append_uint(tail, fin.dropped_events);
    tail += ", \"complete\": true}}\n";
    file_.write(tail);
    return file_.close(error);
  }

 private:
  TraceInfo info_;
  OutputFile file_;
  std::string line_;
  size_t backend_offset_ = 0;
  bool first_ = true;
};

}  // namespace

std::unique_ptr<Exporter> make_chrome_trace_exporter() {
  return std::make_unique<ChromeTraceExporter>();
}

}  // namespace fqntrace

// The exporter interface. A session owns one or more exporters; all their methods are called
// from the drain thread only (or from the thread stopping the session, after the drain thread
// has ended), so implementations need no locking. One file per output format.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "plugin/event.h"

namespace fqntrace {

struct TraceInfo {
  std::string path;
  std::string trace_name;       // the FQNTRACE value as given
  long pid = 0;
  int rank = 0;
  int world_size = 1;
  std::string backend;          // distributed backend, empty if unknown
  uint64_t base_time_ns = 0;    // wall clock (ns since epoch) that ts == 0 stands for
  uint64_t mono_origin_ns = 0;  // monotonic clock reading that corresponds to base_time_ns
  std::string process_name;
  std::string version;
};

// A raw event with its strings resolved and its times relative to TraceInfo::base_time_ns.
struct EventRecord {
  const RawEvent& raw;
  uint32_t tid;                 // OS thread id
  const std::string& name;
  const std::string& fqn;
  const std::string& module_type;
  uint64_t ts_ns;
  uint64_t dur_ns;
  uint64_t flow_id;             // kNode with a forward op: id of its fwdbwd flow, else 0
  uint64_t flow_src_ts_ns;
  const std::string* input_dims = nullptr;   // FQNTRACE_SHAPES: JSON arrays, else nullptr
  const std::string* input_types = nullptr;
};

struct FinishInfo {
  uint64_t dropped_events = 0;
  uint64_t events_written = 0;
};

class Exporter {
 public:
  virtual ~Exporter() = default;
  virtual const char* format_name() const = 0;
  // Opens the output; false (with *error set) if it cannot be written. Nothing else is called then.
  virtual bool open(const TraceInfo& info, std::string* error) = 0;
  virtual void thread_seen(uint32_t tid, const std::string& thread_name) = 0;
  // The distributed backend became known after open (init_process_group ran later).
  virtual void backend_known(const std::string& backend) {}
  virtual void event(const EventRecord& e) = 0;
  // Pushes buffered bytes to the OS. false (with *error) when the write failed (e.g. disk full).
  virtual bool flush(std::string* error) = 0;
  // Completes the file (valid JSON) and closes it.
  virtual bool finish(const FinishInfo& info, std::string* error) = 0;
};

// A buffered output file shared by the exporters. Plain write(2) on our own buffer rather than
// stdio: a forked child (DataLoader worker) inherits the buffer but never writes it, whereas
// stdio would flush the parent's half-written bytes again at the child's exit.
class OutputFile {
 public:
  ~OutputFile();
  bool open(const std::string& path, std::string* error);
  void write(const std::string& bytes);
  // Formatting in place (no intermediate string): append to pending(), then call wrote().
  std::string& pending() { return buffer_; }
  void wrote();
  // Overwrites bytes already written at `offset` (same length): fills in a header field that
  // became known later, in place, so the file stays valid whenever it is cut.
  void patch(size_t offset, const std::string& bytes);
  bool flush(std::string* error);
  bool close(std::string* error);

 private:
  static constexpr size_t kBufferBytes = 1 << 20;
  int fd_ = -1;
  std::string path_;
  std::string buffer_;
  size_t flushed_ = 0;  // bytes already handed to the OS
  int failed_errno_ = 0;
};

// The drain thread's per-event step (plugin/session.cpp), also what bench/exporter_bench measures:
// resolves the event's interned names, makes its times relative to the trace's origin
// (`mono_origin_ns`, TraceInfo::mono_origin_ns), numbers its fwdbwd flow (`*next_flow_id` counts
// the session's flows) and hands the EventRecord to every exporter. `input_dims`/`input_types`:
// the op's shapes as JSON arrays (FQNTRACE_SHAPES), or nullptr.
void deliver_event(const RawEvent& e, uint32_t tid, uint64_t mono_origin_ns, uint64_t* next_flow_id,
                   const std::vector<std::unique_ptr<Exporter>>& exporters,
                   const std::string* input_dims = nullptr, const std::string* input_types = nullptr);

std::unique_ptr<Exporter> make_chrome_trace_exporter();
std::unique_ptr<Exporter> make_json_lines_exporter();
std::unique_ptr<Exporter> make_summary_exporter();

}  // namespace fqntrace

// The exporter interface. A session owns one or more exporters through its drain; all their
// methods are called from one thread at a time (the drain thread, or the thread stopping the
// session after the drain thread has ended), so implementations need no locking. One file per
// output format; exporters see events, never buffers or the observer.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "buffer/event.h"

namespace fqntrace {

struct TraceInfo {
  std::string path;
  std::string trace_name;  // the FQNTRACE value as given
  long pid = 0;
  int rank = 0;
  int world_size = 1;
  std::string backend;          // distributed backend, empty if unknown
  uint64_t base_time_ns = 0;    // wall clock (ns since epoch) that ts == 0 stands for
  uint64_t mono_origin_ns = 0;  // monotonic clock reading that corresponds to base_time_ns
  std::string process_name;
  std::string version;
  bool memory = false;        // FQNTRACE_MEMORY: kMemory records may come (summary numbers)
  double sample = 1.0;        // FQNTRACE_SAMPLE: the probability an op was recorded
  bool sample_spans = false;  // sampled, and the backward spans carry the nodes' time (node_ns)
  // A capture's file (docs/on-demand.md): its header's "capture" object as JSON text, else "".
  std::string capture_json;
};

// A raw event with its strings resolved and its times relative to TraceInfo::base_time_ns.
// The strings are interned: they stay valid (same address) until the exporter has finished.
struct EventRecord {
  const RawEvent& raw;  // a range or a kMemory sample (never kShapes or kServe); times
                        // still in ticks
  uint32_t tid;         // OS thread id
  const std::string& name;
  const std::string& fqn;
  const std::string& module_type;  // kModule: the module's class, else ""
  const std::string& collective;   // kCollective: its kind ("allreduce"), else ""
  uint64_t ts_ns;
  uint64_t dur_ns;
  uint64_t flow_id;  // kNode with a forward op: id of its fwdbwd flow, else 0
  uint64_t flow_src_ts_ns;
  const std::string* input_dims = nullptr;  // FQNTRACE_SHAPES: JSON arrays, else nullptr
  const std::string* input_types = nullptr;
};

// A device activity (kernel, memcpy, memset) collected through torch's Kineto with FQNTRACE_DEVICE
// (python/fqntrace/_device_time.py) and joined to the op that launched it: written on a track of
// its own per device stream (`tid`, named by the drain), with the launching op's fqn and phase.
struct DeviceEventRecord {
  const std::string& cat;   // "kernel", "gpu_memcpy" or "gpu_memset" (Kineto's categories)
  const std::string& name;  // as Kineto names it
  uint32_t tid;             // the stream's track (drain/device_events.h)
  int device;
  int64_t stream;
  uint64_t ts_ns;  // relative to TraceInfo::base_time_ns, as EventRecord's
  uint64_t dur_ns;
  const std::string& fqn;
  const std::string& phase;
  int64_t correlation;  // Kineto's: the runtime call that launched it (-1: none)
  int64_t external_id;  // Kineto's: the op that launched it (-1: none)
};

// Whether the traced process used a GPU by the time its file ends: the Python package learns it
// from torch's own CUDA initialization (python/fqntrace/_device.py). `known` false: nobody
// watched (a C++ program without the package), and the tail says nothing.
struct DeviceUse {
  bool known = false;
  bool used = false;
  std::string type;  // when used: "cuda", or "rocm" for torch's ROCm build
  int count = 0;     // when used: the devices the process sees
  // FQNTRACE_DEVICE: device activity was asked for (`collect`). `collect_off`: why none was
  // collected (no GPU here), else "". The counts are the file's own: Kineto sessions joined
  // (`recordings`), the device events written, those whose launching op fqntrace did not record
  // (left out), and Kineto's CPU ops and how many of them fqntrace's attribution named (the
  // join's health: all, when the ids work).
  bool collect = false;
  std::string collect_off;
  uint64_t recordings = 0;
  uint64_t collected = 0;
  uint64_t not_attributed = 0;
  uint64_t ops = 0;
  uint64_t ops_joined = 0;
};

struct FinishInfo {
  uint64_t dropped_events = 0;
  uint64_t events_written = 0;
  DeviceUse device;
};

class Exporter {
 public:
  virtual ~Exporter() = default;
  // Opens the output; false (with *error set) if it cannot be written. Nothing else is called then.
  virtual bool open(const TraceInfo& info, std::string* error) = 0;
  virtual void thread_seen(uint32_t tid, const std::string& thread_name) = 0;
  // The process group started after open (init_process_group ran later): `group` is the
  // TraceInfo given to open() with its backend, rank and world size filled in.
  virtual void process_group_known(const TraceInfo& group) {}
  // Renames the open output to `path` (never replacing an existing file); false with *error
  // when it stays where it is. Writing goes on either way.
  virtual bool move_to(const std::string& path, std::string* error) = 0;
  virtual void event(const EventRecord& e) = 0;
  // FQNTRACE_DEVICE's events; formats that carry none ignore them.
  virtual void device_event(const DeviceEventRecord& e) {}
  // An entry of the module table (buffer/module_table.h): a module fqntrace named, its class and
  // its parent's fqn ("" for a root). Formats that carry no table ignore it.
  virtual void module_declared(const std::string& fqn, const std::string& module_type,
                               const std::string& parent) {}
  // Pushes buffered bytes to the OS. false (with *error) when the write failed (e.g. disk full).
  virtual bool flush(std::string* error) = 0;
  // Completes the file (valid JSON) and closes it.
  virtual bool finish(const FinishInfo& info, std::string* error) = 0;
};

std::unique_ptr<Exporter> make_chrome_trace_exporter();
std::unique_ptr<Exporter> make_json_lines_exporter();

}  // namespace fqntrace

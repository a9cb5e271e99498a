// Hand-written JSON text shared by the exporters: one escaping routine, locale-independent
// numbers, and the one place that turns an event into its JSON object (Chrome and JSON Lines
// write the same objects).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "exporters/exporter.h"

namespace fqntrace::json {

// Appends s as a quoted JSON string. Control characters are escaped; invalid UTF-8 becomes U+FFFD,
// so the file stays valid JSON whatever a module or op is called.
void append_string(std::string& out, std::string_view s);
void append_int(std::string& out, int64_t v);
void append_uint(std::string& out, uint64_t v);
// Nanoseconds as microseconds with three decimals ("12.345"), as Kineto writes ts and dur.
void append_us(std::string& out, uint64_t ns);
// Starts a line: `separator` before every line but the very first one a writer emits (`*first`).
void begin_line(std::string& out, const char* separator, bool* first);
// An "X" slice's object up to its args' fqn: `{"ph":"X","cat":…,"name":…,"pid":…,"tid":…,"ts":…,
// "dur":…,"args":{"fqn":…` (the caller adds the other args and closes both objects).
void append_slice_head(std::string& out, std::string_view cat, const std::string& name, long pid,
                       uint32_t tid, uint64_t ts_ns, uint64_t dur_ns, const std::string& fqn);

// The event (and, for a node with a forward op, the flow's two ends), each object on its own
// line, each line preceded by `separator` except the very first one the writer emits
// (`*first` tracks that).
void append_event(std::string& out, const EventRecord& e, long pid, const char* separator,
                  bool* first);
void append_thread_name(std::string& out, long pid, uint32_t tid, const std::string& name,
                        const char* separator, bool* first);
// One entry of the module table: {"ph":"M","name":"fqntrace_module", ..., "args":{"fqn",
// "module_type" and, below a root, "parent"}} (docs/trace-format.md, *Module table*).
void append_module_entry(std::string& out, long pid, const std::string& fqn,
                         const std::string& module_type, const std::string& parent,
                         const char* separator, bool* first);
// The process group is usually not known when the header is written: the backend comes with
// init_process_group, and a process started without RANK (an mp.spawn child) learns its rank and
// world size only then. So the fields that say it are written padded with spaces to a fixed
// width, *offset (if given) receives where that slot starts in `out`, and the *_slot() functions
// make the bytes that overwrite it in place later.
void append_process_name(std::string& out, long pid, const std::string& name, int rank,
                         const char* separator, bool* first, size_t* labels_offset = nullptr);
// `"distributedInfo": {"backend": ..., "rank": R, "world_size": W}` — "rank": R with the space,
// which HolisticTraceAnalysis' rank pattern requires.
constexpr size_t kDistributedSlot = 96;
constexpr size_t kLabelsSlot = 24;
void append_distributed_info(std::string& out, const TraceInfo& info,
                             size_t* slot_offset = nullptr);
// `, "sample": p` for a sampled trace (FQNTRACE_SAMPLE < 1), shortest text that reads back as p;
// nothing for a full trace.
void append_sample(std::string& out, const TraceInfo& info);
// `, "capture": {...}` for a capture's file (docs/on-demand.md); nothing otherwise.
void append_capture(std::string& out, const TraceInfo& info);
// `, "device": {"used": false}` or `, "device": {"used": true, "type": "cuda", "count": N}` in a
// tail; nothing when the device use is not known.
void append_device(std::string& out, const DeviceUse& device);
std::string distributed_slot(const TraceInfo& info);
std::string labels_slot(int rank);  // the process_labels value, "rank R"

}  // namespace fqntrace::json

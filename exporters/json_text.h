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

// The event (and, for a node with a forward op, the flow's two ends), each object on its own
// line, each line preceded by `separator` except the very first one the writer emits
// (`*first` tracks that).
void append_event(std::string& out, const EventRecord& e, long pid, const char* separator,
                  bool* first);
void append_thread_name(std::string& out, long pid, uint32_t tid, const std::string& name,
                        const char* separator, bool* first);
void append_process_name(std::string& out, long pid, const std::string& name, int rank,
                         const char* separator, bool* first);
// `"distributedInfo": {"backend": ..., "rank": R, "world_size": W}` — "rank": R with the space,
// which HolisticTraceAnalysis' rank pattern requires.
// The backend is usually not known when the header is written: its value is written as `null`
// padded with spaces to kBackendSlot characters, and *backend_offset (if given) receives where
// that slot starts in `out`, so backend_slot() can overwrite it in place later.
constexpr size_t kBackendSlot = 24;
void append_distributed_info(std::string& out, const TraceInfo& info, size_t* backend_offset = nullptr);
std::string backend_slot(const std::string& backend);

}  // namespace fqntrace::json

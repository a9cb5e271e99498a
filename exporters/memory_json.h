// FQNTRACE_MEMORY in the two streaming formats (docs/trace-format.md): each allocator report is a
// Kineto-style "[memory]" instant event (with our fqn and phase) followed by a counter event of
// the device's allocated bytes, which Perfetto draws as a track; an op carries the bytes
// allocated while it ran. Kept apart from json_text.cpp so the memory output stays one small piece.
#pragma once
#include <string>

#include "exporters/exporter.h"

namespace fqntrace::json {

// A kMemory record: its two lines (`separator` and `*first` as in append_event).
void append_memory_event(std::string& out, const EventRecord& e, long pid, const char* separator,
                         bool* first);
// Inside an op's args: `,"alloc_bytes":N` when the op allocated anything.
void append_op_memory(std::string& out, const OpPayload& op);
// "cpu", "cuda:0", …: the counter track's device.
std::string device_label(int8_t type, int8_t index);

}  // namespace fqntrace::json

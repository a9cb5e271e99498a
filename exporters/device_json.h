// FQNTRACE_DEVICE's device events in the two streaming formats (docs/trace-format.md, *Device
// events*): Kineto's own categories and args (device, stream, correlation, External id) so the
// same tools read them, on a track of fqntrace's process per device stream, with the launching
// op's fqn and phase. Kept apart from the op lines: device events come in batches, once per
// recording.
#pragma once
#include <string>

#include "exporters/exporter.h"

namespace fqntrace::json {

void append_device_event(std::string& out, const DeviceEventRecord& e, long pid,
                         const char* separator, bool* first);

}  // namespace fqntrace::json

// Whether the traced process used a GPU: told by the Python package when torch initializes CUDA
// (python/fqntrace/_device.py), read when a trace file's tail is written. Process-wide: a device
// once initialized stays so, and every later session's and capture's file says it.
#pragma once
#include <string>

#include "exporters/exporter.h"

namespace fqntrace::device_use {

// The package watches from now on (nothing used yet), or has seen `type` initialized with
// `count` devices (used = true).
void note(bool used, const std::string& type, int count);

// FQNTRACE_DEVICE: the package collects device activity (`on`); `off`: why it collects none
// (no GPU here, or it failed), else "".
void collecting(bool on, const std::string& off);

// What the next tail says (known = false until note() was called).
DeviceUse current();

}  // namespace fqntrace::device_use

// FQNTRACE_DEVICE's device events as the package hands them over (binding/session_methods.cpp),
// once per recording: joined to their launching ops already (python/fqntrace/_device_time.py),
// with wall-clock times. Each device stream gets a track of fqntrace's process: a thread id no
// OS thread has (Linux's are < 2^22) above the steps' track's neighbourhood, named after the
// device and stream. Kernels on one stream never overlap; a collector that saw them overlap
// (clock rounding) puts the later one on another lane, so every track nests.
#pragma once
#include <cstdint>
#include <string>

namespace fqntrace {

struct DeviceEvent {
  std::string cat;  // "kernel", "gpu_memcpy", "gpu_memset"
  std::string name;
  std::string fqn;
  std::string phase;
  int device = 0;
  int64_t stream = 0;
  int lane = 0;
  uint64_t wall_ns = 0;  // start, ns since the Unix epoch
  uint64_t dur_ns = 0;
  int64_t correlation = -1;
  int64_t external_id = -1;
};

// A recording's counts beside its events (DeviceUse says what each is).
struct DeviceCounts {
  uint64_t not_attributed = 0;
  uint64_t ops = 0;
  uint64_t ops_joined = 0;
};

// Device 0..254, lane 0..15, stream by its low 16 bits: 0x70000000 | device << 20 | lane << 16.
inline uint32_t device_track_tid(const DeviceEvent& e) {
  uint32_t device = static_cast<uint32_t>(e.device) & 0xffu;
  if (device == 0xffu) device = 0xfeu;  // never the steps' track (steps::kStepTrackTid)
  return 0x70000000u | device << 20 | (static_cast<uint32_t>(e.lane) & 0xfu) << 16 |
         (static_cast<uint32_t>(e.stream) & 0xffffu);
}

inline std::string device_track_name(const DeviceEvent& e) {
  std::string name = "GPU " + std::to_string(e.device) + " stream " + std::to_string(e.stream);
  if (e.lane != 0) name += " (" + std::to_string(e.lane + 1) + ")";
  return name;
}

}  // namespace fqntrace

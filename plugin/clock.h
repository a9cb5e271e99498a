// Monotonic and wall clocks. Events are stamped with the monotonic clock (cheap, vDSO); the
// session records one (monotonic, wall) pair at start so exporters can anchor to wall time.
#pragma once
#include <cstdint>
#include <ctime>

namespace fqntrace {

inline uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t wall_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace fqntrace

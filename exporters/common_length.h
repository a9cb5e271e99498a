// How many leading bytes two texts share: the gzip encoder's matcher (how long a match runs) and
// the event writer (how many leading digits a time shares with the last one after its head).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace fqntrace {

// At most `limit`, compared eight bytes at a time (matches in trace text run for tens of bytes;
// a byte loop spent more than half the gzip drain's matcher time on them).
inline size_t common_length(const void* a_text, const void* b_text, size_t limit) {
  const unsigned char* a = static_cast<const unsigned char*>(a_text);
  const unsigned char* b = static_cast<const unsigned char*>(b_text);
  size_t n = 0;
  for (; n + 8 <= limit; n += 8) {
    uint64_t x, y;
    std::memcpy(&x, a + n, 8);
    std::memcpy(&y, b + n, 8);
    if (x != y) return n + static_cast<size_t>(__builtin_ctzll(x ^ y) >> 3);  // little-endian
  }
  while (n < limit && a[n] == b[n]) ++n;
  return n;
}

}  // namespace fqntrace

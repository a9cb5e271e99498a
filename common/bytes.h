// Bytes compared and loaded a word at a time, inline: the observer's name cache and the CLI's
// summary engine compare short texts (op names, fqns, pid tokens) millions of times, where a
// call to memcmp costs more than the compare itself. Standard library only: both sides include
// it (scripts/check_layers.py).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace fqntrace {

// The eight bytes at p as a word (the first in the low byte on a little-endian machine).
inline uint64_t load_word(const char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

// Do the n bytes at a and b match?
inline bool same_bytes(const char* a, const char* b, size_t n) {
  auto load4 = [](const char* p) {
    uint32_t w;
    std::memcpy(&w, p, 4);
    return w;
  };
  if (n >= 8) {
    for (size_t i = 0; i + 8 < n; i += 8) {
      if (load_word(a + i) != load_word(b + i)) return false;
    }
    return load_word(a + n - 8) ==
           load_word(b + n - 8);  // the last word, overlapping the one before
  }
  if (n >= 4) return load4(a) == load4(b) && load4(a + n - 4) == load4(b + n - 4);
  // 0..3 bytes: the first, middle and last byte cover them all.
  return n == 0 || (a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1]);
}

}  // namespace fqntrace

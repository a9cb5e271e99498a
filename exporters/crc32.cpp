#include "exporters/crc32.h"

#include <array>
#include <cstring>

#ifdef FQNTRACE_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

namespace fqntrace {
namespace {

constexpr uint32_t kPolynomial = 0xEDB88320u;  // 0x04C11DB7 reflected

// kTables[k][b]: the CRC of byte b followed by k zero bytes, so that eight input bytes are
// folded in with eight lookups instead of eight dependent byte steps.
using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c & 1) ? (c >> 1) ^ kPolynomial : c >> 1;
    t[0][b] = c;
  }
  for (size_t k = 1; k < 8; ++k) {
    for (size_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
  }
  return t;
}

constexpr Tables kTables = make_tables();

}  // namespace

uint32_t crc32_portable(uint32_t crc, const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
  for (; size >= 8; size -= 8, p += 8) {
    uint32_t low, high;  // little-endian words, as the reflected CRC consumes bytes
    std::memcpy(&low, p, 4);
    std::memcpy(&high, p + 4, 4);
    low ^= c;
    c = kTables[7][low & 0xFF] ^ kTables[6][(low >> 8) & 0xFF] ^ kTables[5][(low >> 16) & 0xFF] ^
        kTables[4][low >> 24] ^ kTables[3][high & 0xFF] ^ kTables[2][(high >> 8) & 0xFF] ^
        kTables[1][(high >> 16) & 0xFF] ^ kTables[0][high >> 24];
  }
  for (; size > 0; --size, ++p) c = (c >> 8) ^ kTables[0][(c ^ *p) & 0xFF];
  return ~c;
}

uint32_t crc32_update(uint32_t crc, const void* data, size_t size) {
#ifdef FQNTRACE_HAVE_LIBDEFLATE
  return libdeflate_crc32(crc, data, size);
#else
  return crc32_portable(crc, data, size);
#endif
}

}  // namespace fqntrace

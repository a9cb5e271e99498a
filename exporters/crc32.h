#pragma once
// The gzip trailer's CRC-32 (IEEE 802.3, reflected, the one zlib and libdeflate compute).
// With libdeflate's headers at build time (FQNTRACE_HAVE_LIBDEFLATE) it is libdeflate's
// carry-less multiply; without them a table-driven loop of our own, so that building fqntrace
// needs no library beyond torch (docs/install.md). Both give the same value; tests compare them.
#include <cstddef>
#include <cstdint>

namespace fqntrace {

// crc of `size` bytes at `data`, continuing `crc` (0 to start).
uint32_t crc32_update(uint32_t crc, const void* data, size_t size);

// The table-driven loop alone (slicing by 8), whatever the build has.
uint32_t crc32_portable(uint32_t crc, const void* data, size_t size);

}  // namespace fqntrace

#include "exporters/gzip_stream.h"

#include <zlib.h>

namespace fqntrace {

// Level 1: the drain thread compresses every byte of the trace, and JSON event lines repeat
// themselves so much that the fastest level already shrinks them about tenfold
// (docs/benchmarks.md has the measurement).
constexpr int kLevel = 1;
constexpr int kGzipWindowBits = 15 + 16;  // 32 KiB window, gzip wrapper (header and CRC trailer)
constexpr size_t kChunk = 64 << 10;

struct GzipStream::State {
  z_stream z{};
  bool ready = false;
};

GzipStream::GzipStream() : state_(std::make_unique<State>()) {}

GzipStream::~GzipStream() {
  if (state_->ready) deflateEnd(&state_->z);
}

bool GzipStream::init(std::string* error) {
  if (deflateInit2(&state_->z, kLevel, Z_DEFLATED, kGzipWindowBits, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    *error = "cannot start gzip compression (zlib: out of memory)";
    return false;
  }
  state_->ready = true;
  return true;
}

bool GzipStream::compress(const char* data, size_t size, Flush flush, std::string* out) {
  if (!state_->ready) return false;
  z_stream& z = state_->z;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
  z.avail_in = static_cast<uInt>(size);
  int mode = flush == Flush::kFinish ? Z_FINISH : flush == Flush::kSync ? Z_SYNC_FLUSH : Z_NO_FLUSH;
  for (;;) {
    size_t old = out->size();
    out->resize(old + kChunk);
    z.next_out = reinterpret_cast<Bytef*>(&(*out)[old]);
    z.avail_out = static_cast<uInt>(kChunk);
    int rc = deflate(&z, mode);
    out->resize(old + kChunk - z.avail_out);
    if (rc == Z_STREAM_ERROR) return false;
    if (rc == Z_STREAM_END) return true;
    // Done when deflate had room to spare: all input taken and, for a flush, all output out.
    if (z.avail_out != 0 && z.avail_in == 0) return true;
  }
}

}  // namespace fqntrace

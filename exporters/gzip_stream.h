// gzip on the fly for the streaming outputs (FQNTRACE=run.json.gz / run.jsonl.gz), with zlib.
// Each flush ends with a sync flush point: everything handed in so far can be decompressed from
// the bytes written, so a process killed between flushes leaves a file whose decompressed text
// is whole up to the last flush (`python -m fqntrace repair` closes it).
#pragma once
#include <cstddef>
#include <memory>
#include <string>

namespace fqntrace {

class GzipStream {
 public:
  enum class Flush { kNone, kSync, kFinish };
  GzipStream();
  ~GzipStream();
  GzipStream(const GzipStream&) = delete;
  GzipStream& operator=(const GzipStream&) = delete;

  // false (with *error) if zlib could not be set up.
  bool init(std::string* error);
  // Compresses `size` bytes and appends the compressed bytes that are ready to *out; kSync makes
  // all input so far decodable from *out, kFinish ends the gzip member (trailer included).
  bool compress(const char* data, size_t size, Flush flush, std::string* out);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace fqntrace

// A buffered output file shared by the exporters. Plain write(2) on our own buffer rather than
// stdio: a forked child (DataLoader worker) inherits the buffer but never writes it, whereas
// stdio would flush the parent's half-written bytes again at the child's exit. A path ending in
// .gz is written gzip-compressed (exporters/gzip_stream.h), sync-flushed at every flush().
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "exporters/gzip_stream.h"

namespace fqntrace {

class OutputFile {
 public:
  ~OutputFile();
  bool open(const std::string& path, std::string* error);
  void write(const std::string& bytes);
  // Formatting in place (no intermediate string): append to pending(), then call wrote().
  std::string& pending() { return buffer_; }
  void wrote();
  // The compressor of a .gz file (nullptr for a plain one): a writer that knows which bytes it
  // repeats tells it (GzipStream::repeat), with offsets into pending().
  GzipStream* gzip() { return gzip_.get(); }
  // Overwrites bytes already written at `offset` (same length): fills in a header field that
  // became known later, in place, so the file stays valid whenever it is cut. A gzip file can
  // only be patched while the bytes are still in the buffer (before the first flush).
  void patch(size_t offset, const std::string& bytes);
  bool flush(std::string* error);
  // Renames the open file (the lock goes with it); never replaces an existing file.
  bool move_to(const std::string& path, std::string* error);
  bool close(std::string* error);

 private:
  static constexpr size_t kBufferBytes = 1 << 20;
  // Hands buffer_ to the OS, through the compressor for a gzip file.
  bool write_out(GzipStream::Flush flush);
  bool write_all(const char* data, size_t size);
  bool report(std::string* error) const;  // false with *error once a write has failed
  int fd_ = -1;
  std::string path_;
  std::string buffer_;
  size_t flushed_ = 0;  // bytes already handed to the OS
  int failed_errno_ = 0;
  std::unique_ptr<GzipStream> gzip_;  // set for a .gz path
  std::string compressed_;
};

}  // namespace fqntrace

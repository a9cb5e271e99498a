// A buffered output file shared by the exporters. Plain write(2) on our own buffer rather than
// stdio: a forked child (DataLoader worker) inherits the buffer but never writes it, whereas
// stdio would flush the parent's half-written bytes again at the child's exit.
#pragma once
#include <cstddef>
#include <string>

namespace fqntrace {

class OutputFile {
 public:
  ~OutputFile();
  bool open(const std::string& path, std::string* error);
  void write(const std::string& bytes);
  // Formatting in place (no intermediate string): append to pending(), then call wrote().
  std::string& pending() { return buffer_; }
  void wrote();
  // Overwrites bytes already written at `offset` (same length): fills in a header field that
  // became known later, in place, so the file stays valid whenever it is cut.
  void patch(size_t offset, const std::string& bytes);
  bool flush(std::string* error);
  bool close(std::string* error);

 private:
  static constexpr size_t kBufferBytes = 1 << 20;
  int fd_ = -1;
  std::string path_;
  std::string buffer_;
  size_t flushed_ = 0;  // bytes already handed to the OS
  int failed_errno_ = 0;
};

}  // namespace fqntrace

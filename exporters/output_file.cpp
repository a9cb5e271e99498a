#include "exporters/output_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>  // renameat2
#include <cstring>

namespace fqntrace {

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
}

bool OutputFile::open(const std::string& path, std::string* error) {
  path_ = path;
  // Truncated only once we hold the lock: a file another live process writes is never cut.
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    *error = "cannot open " + path + " for writing (" + std::strerror(errno) + ")";
    return false;
  }
  // Only a regular file is locked and truncated: a device such as /dev/null (the exporter
  // benchmark's sink, shared by every output and process) or a pipe is neither one's to own.
  struct stat st;
  bool regular = ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode);
  // The lock lives as long as the open file (a crash releases it). File systems without
  // flock (ENOLCK, EOPNOTSUPP) go unlocked rather than untraced.
  if (regular && ::flock(fd_, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
    ::close(fd_);
    fd_ = -1;
    *error = "another running process is writing " + path;
    return false;
  }
  if (regular && ::ftruncate(fd_, 0) != 0) {
    *error = "cannot truncate " + path + " (" + std::strerror(errno) + ")";
    ::close(fd_);
    fd_ = -1;
    return false;
  }
  buffer_.reserve(kBufferBytes + (64 << 10));
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) {
    gzip_ = std::make_unique<GzipStream>();
    if (!gzip_->init(error)) return false;
  }
  return true;
}

void OutputFile::write(const std::string& bytes) {
  if (fd_ < 0 || failed_errno_ != 0) return;
  buffer_ += bytes;
  if (buffer_.size() >= kBufferBytes)
    write_out(GzipStream::Flush::kNone);  // failures are remembered
}

void OutputFile::wrote() {
  if (fd_ < 0 || failed_errno_ != 0) {
    buffer_.clear();  // what write() would have dropped
    if (gzip_) gzip_->drop_pending();
  } else if (buffer_.size() >= kBufferBytes) {
    write_out(
        GzipStream::Flush::kNone);  // a failure is remembered and reported by the next flush()
  }
}

bool OutputFile::write_all(const char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::write(fd_, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      failed_errno_ = n < 0 ? errno : EIO;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

bool OutputFile::write_out(GzipStream::Flush flush) {
  if (fd_ < 0 || failed_errno_ != 0) {
    buffer_.clear();
    if (gzip_) gzip_->drop_pending();
    return false;
  }
  bool ok;
  if (gzip_) {
    compressed_.clear();
    ok = gzip_->compress(buffer_.data(), buffer_.size(), flush, &compressed_);
    if (!ok) failed_errno_ = EIO;
    ok = ok && write_all(compressed_.data(), compressed_.size());
  } else {
    ok = write_all(buffer_.data(), buffer_.size());
  }
  if (ok) flushed_ += buffer_.size();  // bytes of the text no longer in the buffer
  buffer_.clear();
  return ok;
}

bool OutputFile::flush(std::string* error) {
  write_out(GzipStream::Flush::kSync);
  return report(error);
}

bool OutputFile::report(std::string* error) const {
  if (failed_errno_ != 0) {
    *error = "writing " + path_ + " failed (" + std::strerror(failed_errno_) + ")";
    return false;
  }
  return true;
}

void OutputFile::patch(size_t offset, const std::string& bytes) {
  if (fd_ < 0 || failed_errno_ != 0) return;
  size_t i = 0;
  if (gzip_) {
    while (i < bytes.size() && offset + i < flushed_) ++i;  // compressed already: left as it was
  }
  for (; i < bytes.size() && offset + i < flushed_; ++i) {
    if (::pwrite(fd_, bytes.data() + i, 1, static_cast<off_t>(offset + i)) != 1)
      failed_errno_ = errno;
  }
  for (; i < bytes.size(); ++i) {
    size_t at = offset + i - flushed_;
    if (at < buffer_.size()) buffer_[at] = bytes[i];
  }
}

bool OutputFile::move_to(const std::string& path, std::string* error) {
  if (fd_ < 0 || path == path_) return fd_ >= 0;
  // RENAME_NOREPLACE: another process's file of that name is never replaced. File systems
  // without it get the same guarantee from link(2), which fails on an existing name.
  int moved = ::renameat2(AT_FDCWD, path_.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE);
  if (moved != 0 && (errno == EINVAL || errno == ENOSYS)) {
    moved = ::link(path_.c_str(), path.c_str());
    if (moved == 0) ::unlink(path_.c_str());
  }
  if (moved != 0) {
    *error = "cannot rename " + path_ + " to " + path + " (" + std::strerror(errno) + ")";
    return false;
  }
  path_ = path;
  return true;
}

bool OutputFile::close(std::string* error) {
  if (fd_ < 0) return true;
  write_out(gzip_ ? GzipStream::Flush::kFinish : GzipStream::Flush::kSync);
  bool ok = report(error);
  if (::close(fd_) != 0 && ok) {
    *error = "closing " + path_ + " failed (" + std::strerror(errno) + ")";
    ok = false;
  }
  fd_ = -1;
  return ok;
}

}  // namespace fqntrace

#include "plugin/demand.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "buffer/ticks.h"
#include "exporters/json_text.h"
#include "plugin/captures.h"
#include "plugin/json_reader.h"
#include "plugin/log.h"
#include "plugin/steps.h"

namespace fqntrace::demand {
namespace {

constexpr int kPeriodMs = 1000;          // the status record's refresh and the request's poll
constexpr int kBusyPeriodMs = 100;       // ... while a capture is under way
constexpr int kStopWaitMs = 200;         // stop() waits this long for the files to go, at most
constexpr int kRetryDirMs = 10000;       // a folder that could not be written is tried again
constexpr size_t kStatusSize = 4096;     // the record is padded to this: one in-place write
constexpr size_t kRequestMax = 1 << 20;  // a bigger request file is not ours
constexpr double kRateWindowS = 2.0;     // steps/s over about the last two seconds

double wall_s() { return static_cast<double>(wall_ns()) / 1e9; }

std::string dir_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}
std::string base_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// What the thread and the session share. The thread keeps its own reference, so a stop() that
// gave up waiting leaves it valid.
struct Shared {
  std::mutex mu;
  std::condition_variable ended_cv;
  Identity id;  // guarded by mu
  bool id_changed = false;
  bool stop = false;
  bool ended = false;
  int wake_fd = -1;  // an eventfd: stop() and moved() wake the thread's poll
  ~Shared() {
    if (wake_fd >= 0) ::close(wake_fd);
  }
};

std::mutex& current_mu() {
  static std::mutex* m = new std::mutex();
  return *m;
}
std::shared_ptr<Shared>& current() {
  static auto* c = new std::shared_ptr<Shared>();
  return *c;
}

void wake(const Shared& s) {
  uint64_t one = 1;
  if (s.wake_fd >= 0) (void)!::write(s.wake_fd, &one, sizeof(one));
}

class DemandThread {
 public:
  explicit DemandThread(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}

  void run() {
    try {
      loop();
    } catch (...) {
      log_line(
          "the thread that answers captures stopped after an internal error; `ps` and "
          "`capture` will not see this process. The job runs on.");
    }
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->ended = true;
    shared_->ended_cv.notify_all();
  }

 private:
  void loop() {
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    pthread_sigmask(SIG_BLOCK, &block, nullptr);  // the program's signals are not ours
    pthread_setname_np(pthread_self(), "fqntrace-demand");
    take_identity();
    while (!stopping()) {
      if (status_fd_ < 0 && due(retry_dir_at_)) open_files();
      drain_notify();
      check_request();
      end_timed_capture();
      uint64_t version = captures::version();
      if (version != written_version_) dirty_ = true;  // a capture moved on: say so now
      if (dirty_ || due(status_at_)) {
        written_version_ = version;
        write_status();
      }
      wait();
    }
    remove_files();
  }

  using Clock = std::chrono::steady_clock;
  bool due(Clock::time_point at) const { return Clock::now() >= at; }
  bool stopping() {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (shared_->id_changed) {
      shared_->id_changed = false;
      moved_ = true;
    }
    return shared_->stop;
  }
  void take_identity() {
    std::lock_guard<std::mutex> lock(shared_->mu);
    id_ = shared_->id;
    control_ = dir_of(id_.trace) + "/.fqntrace";
    status_path_ = control_ + "/" + base_of(id_.trace) + ".status";
    request_path_ = control_ + "/request.json";
  }

  // The status folder, the record, this host's pointer to it and the folder's watch. A failure
  // is said once; the job runs on and the folder is tried again later.
  void open_files() {
    retry_dir_at_ = Clock::now() + std::chrono::milliseconds(kRetryDirMs);
    struct stat st {};
    if (::mkdir(control_.c_str(), 0777) != 0 &&
        (errno != EEXIST || ::stat(control_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))) {
      if (errno == EEXIST || errno == 0) errno = ENOTDIR;
      return warn_once("create", control_);
    }
    int fd = ::open(status_path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return warn_once("write", status_path_);
    status_fd_ = fd;
    dirty_ = true;
    write_pointer();
    notify_fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (notify_fd_ >= 0 &&
        ::inotify_add_watch(notify_fd_, control_.c_str(), IN_MOVED_TO | IN_CLOSE_WRITE) < 0) {
      ::close(notify_fd_);
      notify_fd_ = -1;
    }
  }

  void warn_once(const char* verb, const std::string& path) {
    if (warned_) return;
    warned_ = true;
    log_line(std::string("cannot ") + verb + " " + path + " (" + std::strerror(errno) +
             "): `python -m fqntrace ps` and `capture` will not see this process until it can; "
             "the job runs on. Make the trace's folder writable.");
  }

  // /tmp/fqntrace-<uid>/<pid>: the record's absolute path, for `ps` and `capture PID`.
  void write_pointer() {
    std::string dir = "/tmp/fqntrace-" + std::to_string(::getuid());
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return;
    std::string absolute = status_path_[0] == '/' ? status_path_ : id_.cwd + "/" + status_path_;
    pointer_path_ = dir + "/" + std::to_string(id_.pid);
    std::string tmp = pointer_path_ + ".tmp";
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    bool ok =
        ::write(fd, absolute.data(), absolute.size()) == static_cast<ssize_t>(absolute.size());
    ::close(fd);
    if (!ok || ::rename(tmp.c_str(), pointer_path_.c_str()) != 0) {
      ::unlink(tmp.c_str());
      pointer_path_.clear();
    }
  }

  void remove_files() {
    if (status_fd_ >= 0) {
      ::close(status_fd_);
      ::unlink(status_path_.c_str());
    }
    if (!pointer_path_.empty()) ::unlink(pointer_path_.c_str());
    if (notify_fd_ >= 0) ::close(notify_fd_);
  }

  void drain_notify() {
    if (notify_fd_ < 0) return;
    alignas(inotify_event) char buffer[4096];
    while (::read(notify_fd_, buffer, sizeof(buffer)) > 0) {
    }
  }

  void wait() {
    auto next = status_at_;
    // While a capture is under way its states change within a second: look ten times as often.
    if (captures::busy())
      next = std::min(next, Clock::now() + std::chrono::milliseconds(kBusyPeriodMs));
    if (timed_index_ != 0 && timed_end_ < next) next = timed_end_;
    if (status_fd_ < 0 && retry_dir_at_ < next) next = retry_dir_at_;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
    pollfd fds[2] = {{shared_->wake_fd, POLLIN, 0}, {notify_fd_, POLLIN, 0}};
    ::poll(fds, notify_fd_ >= 0 ? 2 : 1,
           static_cast<int>(std::max<long long>(0, std::min<long long>(ms, kPeriodMs))));
    if (fds[0].revents & POLLIN) {
      uint64_t count;
      (void)!::read(shared_->wake_fd, &count, sizeof(count));
    }
    if (moved_) {
      moved_ = false;
      remove_files();
      status_fd_ = notify_fd_ = -1;
      pointer_path_.clear();
      take_identity();
      retry_dir_at_ = Clock::now();
    }
  }

  // --- requests ------------------------------------------------------------------------------
  void check_request() {
    struct stat st {};
    if (::stat(request_path_.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
    auto seen = std::make_tuple(st.st_ino, st.st_mtim.tv_sec, st.st_mtim.tv_nsec, st.st_size);
    if (seen == request_seen_) return;
    request_seen_ = seen;
    if (st.st_size <= 0 || static_cast<size_t>(st.st_size) > kRequestMax) return;
    int fd = ::open(request_path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    std::string text(static_cast<size_t>(st.st_size), '\0');
    ssize_t n = ::read(fd, text.data(), text.size());
    ::close(fd);
    if (n <= 0) return;
    text.resize(static_cast<size_t>(n));
    if (auto request = json_reader::parse(text)) handle(*request);
  }

  bool names_this_process(const json_reader::Value& request) const {
    const json_reader::Value* targets = request.get("targets");
    if (targets == nullptr) return false;
    for (const json_reader::Value& t : targets->array) {
      const json_reader::Value* host = t.get("host");
      const json_reader::Value* pid = t.get("pid");
      if (host != nullptr && pid != nullptr && host->string == id_.host && pid->is_number() &&
          static_cast<long>(pid->number) == id_.pid) {
        return true;
      }
    }
    return false;
  }

  static double number_or(const json_reader::Value* v, double fallback) {
    return v != nullptr && v->is_number() ? v->number : fallback;
  }

  void handle(const json_reader::Value& request) {
    const json_reader::Value* id = request.get("id");
    if (number_or(request.get("fqntrace_request"), 0) != 1 || id == nullptr || !id->is_string())
      return;
    if (id->string == last_id_) return;
    last_id_ = id->string;
    // A request from before this process started, expired, or for other processes: not ours.
    double now = wall_s();
    if (number_or(request.get("created"), 0) < id_.started ||
        number_or(request.get("expires"), 0) < now || !names_this_process(request)) {
      return;
    }
    double steps = number_or(request.get("steps"), 0);
    double seconds = number_or(request.get("seconds"), 0);
    double at_step = number_or(request.get("at_step"), -1);
    const json_reader::Value* memory = request.get("memory");
    captures::Capture c;
    c.id = id->string;
    c.reason = "request";
    c.steps = steps >= 1 ? static_cast<uint64_t>(steps) : 0;
    c.seconds = seconds > 0 ? seconds : 0;
    c.memory = memory != nullptr && memory->boolean;
    std::string why;
    uint32_t index = 0;
    bool ok = false;
    if (c.steps == 0 && c.seconds == 0) {
      why = "the request asks for no steps and no seconds";
    } else {
      uint64_t at =
          c.steps != 0 && at_step >= 0 ? static_cast<uint64_t>(at_step) : steps::kNextStep;
      ok = steps::order_capture(c, at, &why, &index);
    }
    if (ok && c.seconds > 0) {
      // A capture in seconds starts at once; one with steps too ends at whichever comes first.
      timed_index_ = index;
      timed_end_ = seconds_from_now(c.seconds);
    }
    captures::set_answer({c.id, ok ? "accepted" : "refused", why});
    dirty_ = true;
  }

  static Clock::time_point seconds_from_now(double seconds) {
    return Clock::now() + std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
  }

  void end_timed_capture() {
    if (timed_index_ == 0) return;
    captures::Capture c;
    if (!captures::find(timed_index_, &c) || c.state == captures::State::kDone ||
        c.state == captures::State::kFailed || c.state == captures::State::kWriting) {
      timed_index_ = 0;
      return;
    }
    // With steps as well (pending until its first step), the seconds count from that step.
    if (c.state == captures::State::kPending) {
      timed_end_ = seconds_from_now(c.seconds);
      return;
    }
    if (!due(timed_end_)) return;
    steps::end_capture(timed_index_);
    timed_index_ = 0;
    dirty_ = true;
  }

  // --- the status record ------------------------------------------------------------------------
  double steps_per_s(uint64_t step, double now) {
    if (step == 0) return 0;  // the time before the first step (imports, set-up) is no rate
    rate_samples_.emplace_back(now, step);
    while (rate_samples_.size() > 2 && now - rate_samples_[1].first >= kRateWindowS)
      rate_samples_.pop_front();
    const auto& [t0, s0] = rate_samples_.front();
    if (now - t0 < 0.5 || step < s0) return last_rate_;
    last_rate_ = static_cast<double>(step - s0) / (now - t0);
    return last_rate_;
  }

  static void append_number(std::string& out, double v) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.3f", std::isfinite(v) ? v : 0.0);
    out += text;
  }

  void write_status() {
    status_at_ = Clock::now() + std::chrono::milliseconds(kPeriodMs);
    dirty_ = false;
    if (status_fd_ < 0) return;
    double now = wall_s();
    uint64_t step = steps::current();
    std::vector<captures::Capture> recent = captures::recent();
    bool capturing = false;
    for (const auto& c : recent) capturing |= c.state == captures::State::kRecording;
    std::string s = "{\"fqntrace_status\": 1, \"pid\": ";
    json::append_int(s, id_.pid);
    s += ", \"host\": ";
    json::append_string(s, id_.host);
    s += ", \"rank\": ";
    json::append_int(s, id_.rank);
    s += ", \"world_size\": ";
    json::append_int(s, id_.world_size);
    s += ", \"pattern\": ";
    json::append_string(s, id_.pattern);
    s += ", \"trace\": ";
    json::append_string(s, id_.trace);
    s += ", \"cwd\": ";
    json::append_string(s, id_.cwd);
    s += ", \"started\": ";
    append_number(s, id_.started);
    s += ", \"updated\": ";
    append_number(s, now);
    s += ", \"step\": ";
    json::append_uint(s, step);
    s += ", \"steps_per_s\": ";
    append_number(s, steps_per_s(step, now));
    s += capturing ? ", \"state\": \"capturing\"" : ", \"state\": \"armed\"";
    s += ", \"window\": ";
    json::append_string(s, id_.window);
    s += ", \"slow\": ";
    append_number(s, id_.slow);
    s += notify_fd_ >= 0 ? ", \"notify\": true" : ", \"notify\": false";
    s += ", \"captures\": [";
    for (size_t i = 0; i < recent.size(); ++i) {
      const captures::Capture& c = recent[i];
      if (i > 0) s += ", ";
      s += "{\"id\": ";
      json::append_string(s, c.id);
      s += ", \"index\": ";
      json::append_uint(s, c.index);
      s += ", \"file\": ";
      json::append_string(s, c.file);
      s += ", \"reason\": ";
      json::append_string(s, c.reason);
      s += ", \"first_step\": ";
      json::append_uint(s, c.first_step);
      s += ", \"last_step\": ";
      if (c.last_step != 0 || c.state == captures::State::kDone) {
        json::append_uint(s, c.last_step);
      } else {
        s += "null";
      }
      s += ", \"state\": ";
      json::append_string(s, captures::state_name(c.state));
      if (!c.error.empty()) {
        s += ", \"error\": ";
        json::append_string(s, c.error);
      }
      s += "}";
    }
    s += "]";
    captures::Answer a = captures::last_answer();
    if (!a.id.empty()) {
      s += ", \"request\": {\"id\": ";
      json::append_string(s, a.id);
      s += ", \"answer\": ";
      json::append_string(s, a.answer);
      s += ", \"why\": ";
      json::append_string(s, a.why);
      s += "}";
    }
    s += "}";
    // Padded to a fixed size and written in place: one write, no rename, and a longer record
    // than before never leaves a tail of the old one.
    if (s.size() + 1 < kStatusSize) s.resize(kStatusSize - 1, ' ');
    s += "\n";
    if (::pwrite(status_fd_, s.data(), s.size(), 0) != static_cast<ssize_t>(s.size())) {
      warn_once("write", status_path_);
    }
  }

  std::shared_ptr<Shared> shared_;
  Identity id_;
  std::string control_, status_path_, request_path_, pointer_path_;
  int status_fd_ = -1;
  int notify_fd_ = -1;
  bool warned_ = false;
  bool dirty_ = true;
  bool moved_ = false;
  Clock::time_point status_at_ = Clock::now();
  Clock::time_point retry_dir_at_ = Clock::now();
  std::tuple<ino_t, time_t, long, off_t> request_seen_{};
  std::string last_id_;
  uint32_t timed_index_ = 0;
  Clock::time_point timed_end_{};
  std::deque<std::pair<double, uint64_t>> rate_samples_;
  double last_rate_ = 0;
  uint64_t written_version_ = 0;
};

}  // namespace

void start(const Identity& identity) {
  stop();
  auto shared = std::make_shared<Shared>();
  shared->id = identity;
  shared->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  {
    std::lock_guard<std::mutex> lock(current_mu());
    current() = shared;
  }
  try {
    std::thread([shared] { DemandThread(shared).run(); }).detach();
  } catch (...) {
    log_line(
        "could not start the thread that answers captures; `capture` will not reach this process.");
  }
}

void moved(const std::string& trace, int rank, int world_size) {
  std::lock_guard<std::mutex> lock(current_mu());
  std::shared_ptr<Shared> s = current();
  if (!s) return;
  {
    std::lock_guard<std::mutex> inner(s->mu);
    s->id.trace = trace;
    s->id.rank = rank;
    s->id.world_size = world_size;
    s->id_changed = true;
  }
  wake(*s);
}

void stop() {
  std::shared_ptr<Shared> s;
  {
    std::lock_guard<std::mutex> lock(current_mu());
    s = std::move(current());
  }
  if (!s) return;
  std::unique_lock<std::mutex> lock(s->mu);
  s->stop = true;
  wake(*s);
  // A thread stuck in a file system that stopped answering is left to the process's end.
  s->ended_cv.wait_for(lock, std::chrono::milliseconds(kStopWaitMs), [&] { return s->ended; });
}

}  // namespace fqntrace::demand

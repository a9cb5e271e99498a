// The shared body of the two streaming formats (Chrome trace, JSON Lines): both write a header at
// open, then the same event objects one per line as they arrive, then a tail at finish. A format
// supplies only its header, its line separator and its tail.
#pragma once
#include <memory>
#include <string>

#include "exporters/device_json.h"
#include "exporters/event_lines.h"
#include "exporters/exporter.h"
#include "exporters/json_text.h"
#include "exporters/memory_json.h"
#include "exporters/output_file.h"

namespace fqntrace {

class EventStreamExporter : public Exporter {
 public:
  bool open(const TraceInfo& info, std::string* error) final {
    info_ = info;
    if (!file_.open(info.path, error)) return false;
    lines_ = std::make_unique<json::EventLines>(info.pid, file_.gzip());
    std::string head;
    append_header(head, info, &distributed_offset_);
    json::append_process_name(head, info.pid, info.process_name, info.rank, separator(), &first_,
                              &labels_offset_);
    file_.write(head);
    return file_.flush(
        error);  // the header reaches the file at once: a crash leaves a repairable file
  }

  // Both format straight into the file's buffer: one copy of each byte fewer.
  void thread_seen(uint32_t tid, const std::string& thread_name) final {
    json::append_thread_name(file_.pending(), info_.pid, tid, thread_name, separator(), &first_);
    file_.wrote();
  }

  void event(const EventRecord& e) final {
    if (e.raw.kind == EventKind::kMemory) {
      json::append_memory_event(file_.pending(), e, info_.pid, separator(), &first_);
    } else {  // ranges and module spans: cached line heads (event_lines.h)
      lines_->append(file_.pending(), e, separator(), &first_);
    }
    file_.wrote();
  }

  void device_event(const DeviceEventRecord& e) final {
    json::append_device_event(file_.pending(), e, info_.pid, separator(), &first_);
    file_.wrote();
  }

  void module_declared(const std::string& fqn, const std::string& module_type,
                       const std::string& parent) final {
    json::append_module_entry(file_.pending(), info_.pid, fqn, module_type, parent, separator(),
                              &first_);
    file_.wrote();
  }

  void process_group_known(const TraceInfo& group) final {
    info_.backend = group.backend;
    info_.rank = group.rank;
    info_.world_size = group.world_size;
    file_.patch(distributed_offset_, json::distributed_slot(info_));
    file_.patch(labels_offset_, json::labels_slot(info_.rank));
  }

  bool move_to(const std::string& path, std::string* error) final {
    return file_.move_to(path, error);
  }

  bool flush(std::string* error) final { return file_.flush(error); }

  bool finish(const FinishInfo& fin, std::string* error) final {
    std::string tail;
    append_tail(tail, fin);
    file_.write(tail);
    return file_.close(error);
  }

 protected:
  // Everything before the first event line; *distributed_offset: where json::distributed_slot
  // starts.
  virtual void append_header(std::string& out, const TraceInfo& info,
                             size_t* distributed_offset) = 0;
  virtual const char* separator() const = 0;
  virtual void append_tail(std::string& out, const FinishInfo& fin) = 0;
  const TraceInfo& info() const { return info_; }

 private:
  TraceInfo info_;
  OutputFile file_;
  std::unique_ptr<json::EventLines> lines_;  // made at open, once the pid and the file are known
  size_t distributed_offset_ = 0;
  size_t labels_offset_ = 0;
  bool first_ = true;
};

}  // namespace fqntrace

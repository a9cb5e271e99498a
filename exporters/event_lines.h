// The drain's fast way to write an event's JSON lines, byte for byte what json::append_event
// writes (tests/cpp/event_lines_test.cpp compares them on the whole event mix). Most of a line
// depends only on (name, fqn, phase, category, module type, thread): that text — escaped once —
// is kept per combination, so an event costs a hash lookup, two copies and its numbers, written
// with std::to_chars into a scratch buffer and appended with one copy. Kinds it does not know (and
// collectives, which are rare) go through json::append_event.
//
//
// Backward and recompute module spans (kModuleSpan) are written the same way, byte for byte what
// json::append_module_span writes: their head and arguments are as constant per module as an
// op's.
//
// Writing into a gzip file, it tells the compressor (GzipStream::repeat) which bytes of a line
// repeat text it wrote before — the cached head and arguments, the keys between the numbers — so
// that deflate sends a back-reference for them without searching.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "exporters/exporter.h"
#include "exporters/gzip_stream.h"

namespace fqntrace::json {

class EventLines {
 public:
  enum Category : uint8_t { kUserAnnotation, kCpuOp, kModuleSpanLine };
  // `gzip`: the compressor `out` goes through (nullptr for a plain file).
  explicit EventLines(long pid, GzipStream* gzip = nullptr);
  // As json::append_event(out, e, pid, separator, first).
  void append(std::string& out, const EventRecord& e, const char* separator, bool* first);

 private:
  struct Key {
    uint32_t name_id, fqn_id, type_id, tid;
    uint8_t phase, category;  // category: a Category
    bool operator==(const Key& o) const {
      return name_id == o.name_id && fqn_id == o.fqn_id && type_id == o.type_id && tid == o.tid &&
             phase == o.phase && category == o.category;
    }
  };
  // Where the compressor last saw a head (with the separator before it) and the time written
  // after it (its leading digits usually repeat too).
  struct HeadMark {
    uint64_t mark = 0;
    char last_ts[24];
    uint8_t last_ts_len = 0;
  };
  // Where a combination's text lives in text_: `head` is everything up to `"ts":`, `args` the
  // arguments that never change (`,"args":{"fqn":…,"phase":…` and the module type).
  struct Slot {
    Key key;
    uint32_t head_at = 0, head_len = 0, args_at = 0, args_len = 0;
    bool used = false;
    // Marks are kept per text, not per combination: every op of a module writes the same
    // arguments, every module an op runs in the same head. A training step writes more than
    // deflate's 32 KiB window, so a combination's own last line is mostly out of reach while
    // the last line with the same head or arguments is a few events back.
    HeadMark* head_mark = nullptr;
    uint64_t* args_mark = nullptr;
  };
  // The same for the keys written between numbers (GzipStream::repeat).
  struct KeyMarks {
    uint64_t dur = 0, seq = 0, fwd_tid = 0, flops = 0, alloc = 0, cpu = 0, dims = 0, types = 0;
    uint64_t depth = 0, node_ns = 0, stack = 0;
    uint64_t flow_s = 0, flow_f = 0, flow_pid = 0, flow_tid = 0, flow_ts = 0;
    // `,"depth":D}}` for each one-digit depth: an event's last text in one back-reference.
    uint64_t depth_end[10] = {};
  };
  Slot& slot(const Key& key, const EventRecord& e);
  void share_marks(Slot& s);
  void grow();
  void clear();

  long pid_value_;
  std::string pid_;                     // the same as text
  std::string flow_pid_, flow_bp_pid_;  // the flows' text around the pid
  std::vector<Slot> slots_;             // open addressing, a power of two, at most half full
  size_t used_ = 0;
  Slot* last_ = nullptr;  // the slot of the last event (reset when slots_ moves or starts over)
  std::string text_;      // every slot's text, appended; cleared with the slots when too large
  std::string scratch_;   // the event's lines being formatted
  const char* separator_ = nullptr;  // the last separator seen, and its length
  size_t separator_len_ = 0;
  GzipStream* gzip_;
  KeyMarks marks_;
  // The marks of every head and args text (nodes: their addresses stay while slots_ grows).
  std::unordered_map<std::string, HeadMark> head_marks_;
  std::unordered_map<std::string, uint64_t> args_marks_;
};

}  // namespace fqntrace::json

// The drain's fast way to write an event's JSON lines, byte for byte what json::append_event
// writes (tests/cpp/event_lines_test.cpp compares them on the whole event mix). Most of a line
// depends only on (name, fqn, phase, category, module type, thread): that text — escaped once —
// is kept per combination, so an event costs a hash lookup, two copies and its numbers, written
// with std::to_chars into a scratch buffer and appended with one copy. Kinds it does not know (and
// collectives, which are rare) go through json::append_event.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "exporters/exporter.h"

namespace fqntrace::json {

class EventLines {
 public:
  explicit EventLines(long pid);
  // As json::append_event(out, e, pid, separator, first).
  void append(std::string& out, const EventRecord& e, const char* separator, bool* first);

 private:
  struct Key {
    uint32_t name_id, fqn_id, type_id, tid;
    uint8_t phase, cpu_op;
    bool operator==(const Key& o) const {
      return name_id == o.name_id && fqn_id == o.fqn_id && type_id == o.type_id && tid == o.tid &&
             phase == o.phase && cpu_op == o.cpu_op;
    }
  };
  // Where a combination's text lives in text_: `head` is everything up to `"ts":`, `args` the
  // arguments that never change (`,"args":{"fqn":…,"phase":…` and the module type).
  struct Slot {
    Key key;
    uint32_t head_at = 0, head_len = 0, args_at = 0, args_len = 0;
    bool used = false;
  };
  const Slot& slot(const Key& key, const EventRecord& e);
  void grow();
  void clear();

  long pid_value_;
  std::string pid_;  // the same as text
  std::vector<Slot> slots_;  // open addressing, a power of two, at most half full
  size_t used_ = 0;
  std::string text_;  // every slot's text, appended; cleared with the slots when too large
  std::string scratch_;  // the event's lines being formatted
};

}  // namespace fqntrace::json

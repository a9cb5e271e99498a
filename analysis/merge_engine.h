// `merge`'s per-line work in native code: the same rewrite as fqntrace.analysis.merge's Python
// loop (a rank's process id, its times moved onto the earliest clock base, flow ids renumbered
// across ranks), done on the core's event lines as bytes. simdjson On-Demand finds the few fields
// a line changes and checks the rest is exactly what the Python path would write (compact, the
// same string escapes and number spellings, no repeated key); those bytes are copied unchanged.
// A block holding any line it cannot rewrite that way changes nothing and is refused: the reader
// then reads that part of the file with the Python path. Links no libtorch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace fqntrace::analysis {

class MergeEngine {
 public:
  MergeEngine();
  ~MergeEngine();

  // First pass: collects str(pid) of every event of a block of whole event lines (the core's
  // layout: one event a line, a Chrome line may end with a comma). False: the block is not whole
  // events this pass can read (the pids of the lines before may have been collected). Only the
  // structure and the pids are checked here; rewrite_block reads every value.
  bool scan_block(const char* data, size_t size, bool jsonl, long* events);
  // The pids collected since the last call, in no particular order.
  std::vector<std::string> take_pids();

  // Second pass: the rank whose events come next, and its clock shift in ns. Flows still open
  // in the rank before are forgotten (their ids are never looked up again).
  void start_rank(int64_t rank, int64_t shift_ns, bool jsonl);
  // Appends the block's rewritten events to out, each after ",\n"; the events read, written
  // (an input's process rows are not) and the "X" events among them. False: a line it cannot
  // rewrite exactly (nothing appended, no state changed).
  bool rewrite_block(const char* data, size_t size, std::string& out, long* read, long* written,
                     long* slices);
  // The new id of a flow end (ph 's', 't' or 'f') whose (cat, id) JSON texts make `key`: the
  // Python path's events use the same numbering.
  int64_t flow(std::string_view key, char ph);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace fqntrace::analysis

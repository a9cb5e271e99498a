// Realistic raw events for the exporter benchmark (P4) and its test (a small library both link:
// tests/support/CMakeLists.txt): one training step of a small
// transformer as the observer would record it — forward ops with fqn, phase, sequence numbers and
// FLOPs, nested under nn.Module spans; backward engine wrappers and autograd nodes (with the
// forward op's flow) and the backward ops under them; AccumulateGrad; the loss and an optimizer
// step under Global (user scopes); and a DDP-style collectives sample (the issuing c10d op on the
// training thread, the backend's work range on a communication thread). Names are interned in
// the process's InternTable, exactly like the observer does, so the drain-side code resolves them
// the same way. No shapes (FQNTRACE_SHAPES is off by default).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "buffer/buffer_registry.h"
#include "buffer/event.h"
#include "drain/drainer.h"

namespace fqntrace::mix {

// Thread 0 is the training thread, thread 1 the communication thread (backend work ranges).
constexpr int kMixThreads = 2;

struct MixEvent {
  int thread;
  RawEvent raw;
};

struct MixCounts {
  uint64_t ops = 0;          // kOp and kCollective (all of the mix's collectives are ops)
  uint64_t modules = 0;      // kModule spans
  uint64_t nodes = 0;        // kNode (each with a fwdbwd flow: two more JSON objects)
  uint64_t engine = 0;       // kEngineEval wrappers
  uint64_t user_scopes = 0;  // kUserScope
  uint64_t collectives = 0;  // kCollective: issuing ops and work ranges
  uint64_t flows = 0;        // nodes with a flow
  uint64_t total() const { return ops + modules + nodes + engine + user_scopes; }
};

class EventMix {
 public:
  // `layers` transformer blocks; `collectives`: the DDP sample (2 buckets per step).
  explicit EventMix(int layers = 4, bool collectives = true);

  // One step in end order per thread (the order a ring holds them), times from `origin_ns()`.
  const std::vector<MixEvent>& step() const { return step_; }
  const MixCounts& counts() const { return counts_; }
  uint64_t step_ns() const { return step_ns_; }
  // A monotonic-clock reading that stands for the trace's time zero (TraceInfo::mono_origin_ns).
  static constexpr uint64_t origin_ns() { return 1'000'000'000'000ull; }
  // OS thread ids of the two threads.
  static constexpr uint32_t tid(int thread) { return thread == 0 ? 1843107u : 1843152u; }

  // Step number k: the template moved k steps later in time and sequence numbers.
  RawEvent at_step(const RawEvent& e, uint64_t k) const {
    RawEvent out = e;
    uint64_t shift = k * step_ns_;
    out.range.start_ns += shift;
    out.range.end_ns += shift;
    bool node = out.kind == EventKind::kNode || out.kind == EventKind::kEngineEval;
    if (node && out.range.node.flow_src_ns != 0) out.range.node.flow_src_ns += shift;
    if (out.range.seq >= 0) out.range.seq += static_cast<int64_t>(k) * seqs_per_step_;
    return out;
  }

 private:
  std::vector<MixEvent> step_;
  MixCounts counts_;
  uint64_t step_ns_ = 0;
  int64_t seqs_per_step_ = 0;
};

// The drain side of a session, minus the registry: one ThreadBuffer per traced thread, drained in
// turn by a Drainer (the session's own drain code) into real exporters.
// `format`: chrome, jsonl, or all (both at once; the JSON Lines file gets `.jsonl` appended to
// `path`, unless it is /dev/null); chrome_gz, jsonl_gz;
// chrome_nospans: the Chrome trace without the module spans (their cost, P4).
class MixPipeline {
 public:
  MixPipeline(const std::string& format, const std::string& path);
  const EventMix& mix() const { return mix_; }
  const std::vector<std::string>& paths() const { return paths_; }

  // Producer side: step k's events into the threads' rings (~1,000 events: far below a ring's
  // 65,536, so drain at least every 60 steps).
  void push_step(uint64_t k);
  // Consumer side, what the session's drain thread does each period; returns the events drained.
  uint64_t drain();
  void flush();  // exits the program on a write error
  void finish();

 private:
  EventMix mix_;
  std::vector<std::string> paths_;
  std::unique_ptr<Drainer> drainer_;
  std::vector<std::unique_ptr<ThreadBuffer>> buffers_;
};

}  // namespace fqntrace::mix

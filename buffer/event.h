// The raw event: a fixed-size tagged record written by callbacks into per-thread rings and turned
// into text only on the drain thread. `kind` is the tag: it says which payload of the union is
// meaningful (as Tracy's QueueType does). Names are interned ids, never pointers; times are
// ticks (buffer/ticks.h) until the drain converts them.
#pragma once
#include <cstdint>

namespace fqntrace {

enum class EventKind : uint8_t {
  kOp,          // an operator the dispatcher ran (FUNCTION scope)                  payload: op
  kNode,        // an autograd node's own range (BACKWARD_FUNCTION scope)           payload: node
  kEngineEval,  // "autograd::engine::evaluate_function: <Node>", the engine's
                // wrapper around a node                                            payload: node
  kModule,      // a module-boundary scope (nn.Module forward / ModuleScope)        payload: module
  kUserScope,   // any other USER_SCOPE range (record_function("..."))              payload: none
  kCollective,  // a c10d op issuing a collective, or the backend's work range
                // that runs it ("gloo:all_reduce")                                 payload:
                // collective
  kShapes,  // not a range: a chunk of the next op's encoded input shapes       shapes (no range)
  kServe,   // never written: a scope that only lends its fqn to what runs inside it
  kMemory,  // not a range: an allocation or free the allocator reported         memory
  kModuleSpan,  // never written by callbacks: a module's backward or recompute span on its
                // thread's module track, made by the drain (drain/module_spans.h)  module
};

enum class Phase : uint8_t { kForward, kBackward, kRecompute };

const char* phase_name(Phase p);

struct OpPayload {
  uint64_t flops;        // outermost op of a FLOP-counted nest only, else 0
  uint64_t alloc_bytes;  // FQNTRACE_MEMORY: bytes allocated while the op ran (nested ops included)
};

struct NodePayload {
  uint64_t flow_src_ns;    // start (ticks) of the forward op that created the node; 0: none
  uint32_t flow_src_tid;   // OS thread id of that forward op
  uint32_t fwd_thread_id;  // RecordFunction's logical id of the forward thread
};

struct ModulePayload {
  uint32_t type_id;  // interned class name ("Linear")
  uint32_t reserved;
  // kModuleSpan of a sampled trace: the time of this module's own autograd nodes inside the span
  // (ns), nodes not written included; 0 otherwise.
  uint64_t node_ns;
};

// Whether it is the backend's work range and whether it was opened as a USER_SCOPE range travel
// in the event's flags (kCollectiveWork, kCollectiveUserScope), which keeps this payload at 16 B.
struct CollectivePayload {
  uint64_t bytes;         // what the collective moves (its first argument's tensors)
  uint32_t group_size;    // process group size, 0 when unknown
  uint32_t kind_name_id;  // interned kind ("allreduce"), the issuer's for a work range
};

// Everything a traced range carries: a common header and its kind's payload.
struct Range {
  uint64_t start_ns;
  uint64_t end_ns;
  int64_t seq;  // sequence number, -1 if none
  uint32_t name_id;
  uint32_t fqn_id;
  union {
    OpPayload op;
    NodePayload node;
    ModulePayload module;
    CollectivePayload collective;
  };
  // The RecordFunction's handle (`fn.handle()`, what Kineto writes as "Record function id"):
  // non-zero only while a callback that needs ids runs, i.e. while torch.profiler records
  // (fqntrace then asks for ids too). Joins a torch.profiler trace's cpu_ops to these events.
  uint64_t rf_id;
};

// kShapes: a piece of the encoded input shapes of the op that follows at the same depth
// (drain/shapes_assembler.h reassembles them; buffer/shapes_encoding.h is the format).
struct ShapesChunk {
  static constexpr uint32_t kCapacity = 54;
  uint8_t length;  // bytes used in `bytes`
  bool first;      // first chunk of an op: starts a new encoding
  uint8_t bytes[kCapacity];
};

// kMemory: one report of the allocator (c10::reportMemoryUsageToProfiler), attributed to the
// range open on the thread when it came (its fqn; the event's phase and depth are the range's).
struct MemorySample {
  uint64_t ts;               // ticks
  uint64_t ptr;              // the block's address: pairs a free with its allocation
  int64_t bytes;             // > 0 allocated, < 0 freed
  uint64_t total_allocated;  // the allocator's own total after this report, for this device
  uint64_t total_reserved;   // the allocator's reserve (caching allocators), 0 on CPU
  uint32_t fqn_id;
  int8_t device_type;   // c10::DeviceType
  int8_t device_index;  // -1: the device has no index (CPU)
};

struct RawEvent {
  union {
    Range range;          // every kind but kShapes and kMemory
    ShapesChunk shapes;   // kShapes
    MemorySample memory;  // kMemory
  };
  EventKind kind;
  Phase phase;    // ranges only
  uint8_t depth;  // nesting depth among traced ranges on this thread (0 = outermost)
  uint8_t flags;  // ranges: kTopOp, kPhaseTop, kHasCpu (collectives: kCollectiveWork,
                  // kCollectiveUserScope); kMemory: kMemGrad
  // kHasCpu ranges: the thread's CPU time spent in this range's own code, in kCpuUnitNs units
  // (plugin/thread_cpu.h says which ranges). The four bytes the header left as padding.
  uint32_t self_cpu;
};
static_assert(sizeof(Range) == 56,
              "a range fills the union: header 32 B + payload 16 B + rf_id 8 B");
static_assert(sizeof(ShapesChunk) <= sizeof(Range), "a shapes chunk must not grow the event");
static_assert(sizeof(MemorySample) <= sizeof(Range), "a memory sample must not grow the event");
static_assert(sizeof(RawEvent) == 64, "RawEvent is the unit of every buffer: one cache line");

// The outermost cpu_op (op, node, engine wrapper or issuing collective) on its thread: its time
// is not inside any other op's time, so summing these never counts a nanosecond twice.
constexpr uint8_t kTopOp = 1;
// A cpu_op whose phase or fqn differs from the nearest cpu_op around it (an op re-run by
// activation checkpointing inside a backward node; a kernel of a compiled graph, inside the
// graph's CompiledFunction, generated from a submodule): its time is counted for its own fqn and
// phase and taken out of the enclosing op's, so recompute time shows up as recompute and a
// compiled module's time under its submodules.
constexpr uint8_t kPhaseTop = 2;
// kCollective only: the backend's work range ("gloo:all_reduce") rather than the issuing c10d op.
constexpr uint8_t kCollectiveWork = 4;
// kCollective only: opened as a USER_SCOPE range (gloo's work) rather than as an op.
constexpr uint8_t kCollectiveUserScope = 8;
// A module's forward or recompute, or an outermost backward cpu_op: `self_cpu` holds the thread's
// CPU time in it, less that of the ranges with kHasCpu inside it.
constexpr uint8_t kHasCpu = 16;
constexpr uint64_t kCpuUnitNs = 16;  // self_cpu's unit: 32 bits reach 68 s, in 16 ns steps
// kMemory only: the report came under an AccumulateGrad node (a parameter's .grad).
constexpr uint8_t kMemGrad = 1;
// kNode only: no autograd node encloses it on its thread (a reentrant backward's nodes do not).
constexpr uint8_t kTopNode = 32;
// kNode only, sampled mode: a node not picked for the trace. The drain adds its time to its
// module's backward span and writes nothing for it; ranges inside it are written a level higher.
constexpr uint8_t kSilentNode = 64;
// kOp only, sampled mode: an op no recorded range encloses. `self_cpu` holds how deep its
// RecordFunction lies on the thread's stack (bytes below the stack's top): an op the program
// called lies higher than one an op it called (not picked) called in turn (docs/sampling.md).
constexpr uint8_t kStackDepth = 64;

// Is this range a cpu_op in the trace (category "cpu_op"), rather than a user annotation?
inline bool is_cpu_op(const RawEvent& e) {
  switch (e.kind) {
    case EventKind::kOp:
    case EventKind::kNode:
    case EventKind::kEngineEval:
      return true;
    case EventKind::kCollective:
      return (e.flags & kCollectiveUserScope) == 0;
    default:
      return false;
  }
}

}  // namespace fqntrace

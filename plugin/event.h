// The raw event: a fixed-size record written by callbacks into per-thread rings and turned into
// text only on the drain thread. Names are interned ids, never pointers.
#pragma once
#include <cstdint>

namespace fqntrace {

enum class EventKind : uint8_t {
  kOp,          // an operator the dispatcher ran (FUNCTION scope)
  kNode,        // an autograd node's own range (BACKWARD_FUNCTION scope)
  kEngineEval,  // "autograd::engine::evaluate_function: <Node>", the engine's wrapper around a node
  kModule,      // a module-boundary record scope (nn.Module forward / fqntrace::ModuleScope)
  kUserScope,   // any other USER_SCOPE range (record_function("..."))
  kShapes,      // not a range: a chunk of the next op's encoded input shapes (plugin/shapes.h)
  kServe,       // never written: a scope that only lends its fqn to what runs inside it
};

enum class Phase : uint8_t { kForward, kBackward, kRecompute };

const char* phase_name(Phase p);

struct RawEvent {
  uint64_t start_ns;        // monotonic clock
  uint64_t end_ns;
  uint64_t flow_src_ns;     // kNode: start of the forward op that created the node (0: none)
  int64_t seq;              // sequence number, -1 if none
  uint64_t flops;           // FLOPs of this op (outermost op of a FLOP-counted nest only);
                            // kCollective: bytes the collective moves
  uint32_t name_id;
  uint32_t fqn_id;
  uint32_t type_id;         // kModule: module class name; kCollective: collective kind name
  uint32_t flow_src_tid;    // kNode: OS thread id of that forward op
  uint32_t fwd_thread_id;   // kNode/kEngineEval: RecordFunction's logical forward thread id;
                            // kCollective: process group size
  EventKind kind;
  Phase phase;
  uint8_t depth;            // nesting depth among traced ranges on this thread (0 = outermost)
  uint8_t flags;            // kTopOp ...
};
static_assert(sizeof(RawEvent) == 64, "RawEvent is the unit of every buffer: keep it small");

// The outermost cpu_op (op, node or engine wrapper) on its thread: its time is not inside any
// other op's time, so summing these never counts a nanosecond twice.
constexpr uint8_t kTopOp = 1;
// A collective: the issuing c10d op, or (with kCollectiveWork) the backend's work range, which
// inherits the issuer's fqn and phase and spans the actual communication.
constexpr uint8_t kCollective = 2;
constexpr uint8_t kCollectiveWork = 4;
// A cpu_op whose phase or fqn differs from the nearest cpu_op around it (an op re-run by
// activation checkpointing inside a backward node; a kernel of a compiled graph, inside the
// graph's CompiledFunction, generated from a submodule): its time is counted for its own fqn and
// phase and taken out of the enclosing op's, so recompute time shows up as recompute and a
// compiled module's time under its submodules.
constexpr uint8_t kPhaseTop = 8;

}  // namespace fqntrace

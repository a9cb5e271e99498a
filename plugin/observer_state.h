// The observer's per-thread state: the stack of open frames and what a thread carries between
// callbacks. Private to the observer's two translation units, plugin/observer.cpp (the callbacks)
// and plugin/sampled_observer.cpp (what only a sampled session runs); nothing else includes it.
#pragma once
#include <ATen/record_function.h>

#include <cstddef>
#include <cstdint>

#include "buffer/buffer_registry.h"
#include "buffer/event.h"
#include "plugin/memory_reporter.h"
#include "plugin/name_cache.h"
#include "plugin/seq_map.h"

namespace fqntrace {
class CompiledGraph;
}

namespace fqntrace::observer {

constexpr uint32_t kMaxDepth = 255;  // depth travels as a uint8_t

// An open range: the event it becomes (header and payload, filled at start), and what ranges
// opened inside it inherit.
struct Frame {
  // The event, laid out as RawEvent (asserted below): the common end copies these 64 bytes into
  // the ring whole and sets the end time.
  Range range;     // start_ns in ticks; end_ns is set when it ends
  EventKind kind;  // the range's own kind (a collective is a kOp or kUserScope range here)
  Phase phase;
  // The depth its event is written with: how many written ranges enclose it on this thread.
  // Serve frames write nothing, so they count for no level (their index in `frames` does).
  uint8_t out_depth;
  uint8_t flags;         // kTopOp, kPhaseTop, kTopNode, kCollectiveWork, ...
  uint32_t stack_depth;  // kStackDepth: what the event's self_cpu carries instead of CPU time

  const at::RecordFunction* rf;  // identity of the open range (the object lives until it ends)
  // The depth of what is written right inside it: one level more than its own, unless it
  // writes nothing (a serve frame, a sampled mode's silent node).
  uint8_t inner_depth;
  // Inherited: this range or an enclosing one is a FLOP-counted op / an AccumulateGrad node / an
  // autograd node.
  bool in_flop;
  bool grad;
  bool in_node;
  // Set by whatever gives the frame such work, cleared for every new frame (adjacent, so that
  // begin_frame clears them in one store):
  bool collective;  // range.collective is the payload: the event is a kCollective
  // Its end needs more than writing the event (a collective to finish, allocated bytes, the
  // memory slot to give back, a serve frame that writes nothing, CPU time), so the common end
  // tests one byte.
  bool special_end;
  bool cpu;        // this frame measures CPU time (plugin/thread_cpu.h); its end is special
  bool seq_range;  // sampled mode, module frames: keeps a range of sequence numbers (seq_next)
  bool in_op;      // this range or an enclosing one is a cpu_op (op, node, engine wrapper)
  Phase op_phase;  // phase of the nearest cpu_op among this range and its enclosing ones
  // CPU time: cpu_owner: index of the innermost measuring frame among this one and those
  // enclosing it (-1: none); cpu_up: that of the measuring frame enclosing this one, which its
  // time leaves; cpu_start: the reading at its start; cpu_inside: what the measuring frames
  // inside it spent.
  int16_t cpu_owner;
  int16_t cpu_up;
  uint32_t op_fqn;       // fqn of that cpu_op
  uint32_t issue_mark;   // issuing collective: what collectives::end_issue needs (0: none)
  uint64_t alloc_bytes;  // FQNTRACE_MEMORY: bytes allocated inside this range so far
  uint64_t cpu_start;
  uint64_t cpu_inside;
  // Sampled mode, module frames: the autograd sequence numbers this module's forward creates
  // are its own from seq_next on, until a submodule opens or it ends.
  int64_t seq_next;
};
static_assert(sizeof(Frame) == 128, "frames are indexed by a shift");
static_assert(offsetof(Frame, range) == offsetof(RawEvent, range) &&
                  offsetof(Frame, kind) == offsetof(RawEvent, kind) &&
                  offsetof(Frame, phase) == offsetof(RawEvent, phase) &&
                  offsetof(Frame, out_depth) == offsetof(RawEvent, depth) &&
                  offsetof(Frame, flags) == offsetof(RawEvent, flags) &&
                  offsetof(Frame, stack_depth) == offsetof(RawEvent, self_cpu) &&
                  offsetof(Frame, rf) == sizeof(RawEvent),
              "a frame starts with its event, byte for byte");

// A compiled graph running on this thread: ops opened at `depth` are the graph's own calls.
struct GraphCursor {
  CompiledGraph* graph;
  const uint32_t* fqns;  // fqn of each call under the module the graph runs for
  uint32_t depth;
  uint32_t next;  // the call expected next
};
constexpr uint32_t kMaxGraphNesting = 4;

struct ThreadState {
  uint64_t generation = 0;  // session the thread is attached to
  // That generation once the thread has a buffer in it, else ~0 (no session's): on_start's one
  // compare with session_state::running_generation().
  uint64_t ready_generation = ~uint64_t{0};
  ThreadBuffer* buffer = nullptr;
  SeqMap::Table* seq_table = nullptr;
  uint32_t os_tid = 0;
  uint32_t depth = 0;
  uint32_t pending_module_fqn = 0;  // 0: none
  uint32_t pending_module_type = 0;
  uint32_t pending_serve_fqn = 0;
  bool ran_backward = false;  // this thread has run an autograd node: graph tasks happen here
  // The session's settings, read when the thread attaches to it (they hold for a session).
  bool sampled = false;    // session_state::sampled()
  bool shapes = false;     // session_state::shapes()
  bool cpu_time = false;   // session_state::cpu_time()
  bool op_extras = false;  // sampled, shapes or a compiled graph running: see note_op_extras
  // The thread's last CPU reading while no op has started since (cpu_chain), and the measuring
  // frame whose time ran on from it (cpu_chain_owner, -1: none). A measuring frame opening
  // under that same frame starts at that reading instead of a new one: a stretch of backward
  // ops, a module's first submodule, sibling submodules called one after another with no op
  // between (nn.Sequential) cost one reading each, not two. What ran between (the engine's work
  // between nodes, the parent's Python between two calls) counts to the frame that opens.
  bool cpu_chain = false;
  int16_t cpu_chain_owner = -1;
  uint64_t cpu_chain_ns = 0;
  uint64_t node_rng = 0;     // sampled mode: sampled::pick_node's generator, seeded at attach
  uintptr_t stack_top = 0;   // the highest address of this thread's stack (0: unknown)
  uint32_t graphs_open = 0;  // compiled graphs running (nested ones past the array are ignored)
  // A step range waiting for the range it ends with (steps::end_step(at_enclosing_end)): written
  // when a range opened below depth `step_close_above` ends. 0: none waiting.
  uint32_t step_close_above = 0;
  uint32_t step_name_id = 0;
  uint64_t step_start = 0;
  GraphCursor graphs[kMaxGraphNesting];
  memory::ThreadSlot memory_slot;  // FQNTRACE_MEMORY: our reporter in the slot while depth > 0
  NameCache names;
  // frames[-1] is the thread's root: a frame that never opens or ends, as if the thread ran
  // inside a user scope of the Global fqn in forward, so that every range has a parent to
  // inherit from (attach() sets it up).
  Frame* const frames = frame_storage + 1;
  Frame frame_storage[kMaxDepth + 1];
  ThreadState() = default;
  ThreadState(const ThreadState&) = delete;
  ThreadState& operator=(const ThreadState&) = delete;
};

}  // namespace fqntrace::observer

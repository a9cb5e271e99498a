// The sampled mode's part of the observer (FQNTRACE_SAMPLE < 1, docs/sampling.md): what the
// callbacks of plugin/observer.cpp run only when session_state::sampled(). Private to the
// observer, as plugin/observer_state.h is. Same rules as the callbacks: no lock, no allocation,
// no formatting, no I/O.
#pragma once
#include <ATen/SequenceNumber.h>

#include <cstdint>

#include "buffer/event.h"
#include "buffer/intern.h"
#include "plugin/observer_state.h"
#include "plugin/session_state.h"

namespace fqntrace::observer {
// Hidden: the library exports its symbols by default, and a call to an exported function goes
// through the PLT; these are called from the callbacks and are nobody else's.
namespace __attribute__((visibility("hidden"))) sampled {

  // The highest address of this thread's stack, 0 if unknown (note_stack_depth). For the main
  // thread glibc reads /proc/self/maps to answer: asked once per thread and session, at attach.
  uintptr_t stack_top();

  // An op in backward that no recorded range encloses runs inside a node or its engine wrapper
  // that were not picked (summing a gradient into the next node's input, after the node): the node
  // the engine runs on this thread names its module, as the wrapper would.
  void attribute_to_current_node(Frame & f);

  // An op no recorded range encloses: how deep its RecordFunction (a local of the dispatcher's
  // frame that runs the op) lies on the stack, so the summary can tell the ops the program called
  // from those called by an op that was not picked (kStackDepth). Inline: every such op asks.
  inline void note_stack_depth(const ThreadState* ts, const at::RecordFunction& fn, Frame& f) {
    uintptr_t at = reinterpret_cast<uintptr_t>(&fn);
    if (ts->stack_top > at && ts->stack_top - at < (uintptr_t{1} << 32)) {
      f.stack_depth = static_cast<uint32_t>(ts->stack_top - at);
      f.flags |= kStackDepth;
    }
  }

  // A node is written with probability p (the op's, the same for every node), by this thread's own
  // generator. The others are silent: their time still reaches the trace, through their module's
  // backward span, which the drain builds from every node. A node of no module has no span: it is
  // always written, as it is when the spans are off. Inline: every node asks.
  inline void pick_node(ThreadState * ts, Frame & f) {
    if (f.range.fqn_id == kGlobalFqnId || !session_state::module_spans()) return;
    uint64_t x = ts->node_rng;  // xorshift64
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    ts->node_rng = x;
    if (static_cast<double>(x >> 11) * 0x1.0p-53 >= session_state::sample()) {
      f.inner_depth = f.out_depth;  // writes nothing: no level for what runs inside
      f.flags |= kSilentNode;
    }
  }

  // An op a compiled graph calls directly, at the graph's own depth. The calls not picked never
  // move the cursor, so a name the graph calls more than once would match an earlier call's
  // module: only a name called once places the op; the others keep the module the graph runs in.
  void name_graph_op(const GraphCursor& c, Frame& f);

  // Most forward ops are never seen, so a node cannot find its module through the op that created
  // it (SeqMap::record). Module scopes are complete, and sequence numbers grow by one per node on
  // the thread that creates them: every number taken between a module's start and end, outside its
  // submodules, is one of its nodes. The frames fill the map with those ranges, a stretch at a
  // time: the enclosing module's when a submodule opens, a module's own when it ends.
  void fill_seq(const ThreadState* ts, int64_t from, int64_t to, uint32_t fqn_id);

  // The innermost module frame keeping a range among frames [0, below).
  inline Frame* enclosing_seq_range(ThreadState * ts, uint32_t below) {
    for (uint32_t i = below; i > 0; --i) {
      if (ts->frames[i - 1].seq_range) return &ts->frames[i - 1];
    }
    return nullptr;
  }

  // Module frame f opens at index ts->depth: the sequence numbers taken since the enclosing
  // module's stretch began are that module's nodes; f's own stretch begins (Frame::seq_range).
  void open_seq_range(ThreadState * ts, Frame & f);

  // Module frame i ends: the numbers taken since its stretch began are its own nodes, and the
  // enclosing module's stretch begins again. Inline into the end of a special frame: out of line it
  // cost 113 instructions more per step of P1's MLP, sampled (callgrind).
  inline void close_seq_range(ThreadState * ts, uint32_t i) {
    Frame& f = ts->frames[i];
    int64_t now = static_cast<int64_t>(at::sequence_number::peek());
    fill_seq(ts, f.seq_next, now, f.range.fqn_id);
    if (Frame* up = enclosing_seq_range(ts, i)) up->seq_next = now;
  }

}  // namespace sampled
}  // namespace fqntrace::observer

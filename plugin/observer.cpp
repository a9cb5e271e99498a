// The callbacks and the module scopes (plugin/observer.h). on_start, on_end and write_event stay
// in this one file so that they inline into each other; what only a sampled session runs is in
// plugin/sampled_observer.cpp, and the thread state both share is plugin/observer_state.h.
#include "plugin/observer.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <torch/csrc/autograd/graph_task.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "buffer/buffer_registry.h"
#include "buffer/intern.h"
#include "buffer/ticks.h"
#include "plugin/collectives.h"
#include "plugin/compiled_graph.h"
#include "plugin/flops.h"
#include "plugin/memory_reporter.h"
#include "plugin/observer_state.h"
#include "plugin/param_owners.h"
#include "plugin/rf_name.h"
#include "plugin/sampled_observer.h"
#include "plugin/schema_names.h"
#include "plugin/seq_map.h"
#include "plugin/session_state.h"
#include "plugin/shapes_encoder.h"
#include "plugin/steps.h"
#include "plugin/thread_cpu.h"

namespace fqntrace::observer {
namespace {

constexpr uint32_t kEndSearch = 8;  // how far below the top an unmatched end may close a range
// How far ahead of the expected call a matching op may be found (a call that recorded nothing).
constexpr uint32_t kGraphLookahead = 8;

std::atomic<observer::RegionRootResolver> region_root_resolver{nullptr};

// Frames opened by open_scope() have no RecordFunction: they carry this address instead, which no
// RecordFunction has, so on_end never closes them and close_scope() finds them.
const char kDirectScopeTag = 0;
const at::RecordFunction* const kDirectScope =
    reinterpret_cast<const at::RecordFunction*>(&kDirectScopeTag);

thread_local ThreadState* tls_state = nullptr;
thread_local bool tls_exited = false;

// Marks the thread's buffer retired when the thread ends, so the drain thread can free it.
struct ThreadExit {
  ~ThreadExit() {
    tls_exited = true;
    if (tls_state != nullptr) {
      if (tls_state->buffer != nullptr) session_state::retire_buffer(tls_state->buffer);
      delete tls_state;
      tls_state = nullptr;
    }
  }
};
thread_local ThreadExit tls_exit_hook;

uint32_t os_thread_id() { return static_cast<uint32_t>(::syscall(SYS_gettid)); }

// The frame below every range of a thread (ThreadState::frames[-1]): what a range opened with
// nothing else open inherits. A user scope of the Global fqn in forward, so an op in it is
// forward or backward by the thread's graph task (scope_phase), as a range at the top is; its
// depth is one level above the first written level; nothing in it measures CPU time.
void set_up_root(Frame& root) {
  root = Frame{};
  root.kind = EventKind::kUserScope;
  root.phase = Phase::kForward;
  root.range.fqn_id = kGlobalFqnId;
  root.range.seq = -1;
  root.inner_depth = 0;
  root.cpu_owner = -1;
  root.cpu_up = -1;
}

// Whether an op's start needs special_op_start whatever its name.
void note_op_extras(ThreadState* ts) {
  ts->op_extras = ts->sampled || ts->shapes || ts->graphs_open != 0;
}

// Slow path: first callback on this thread, or first since a new session started.
ThreadState* attach(uint64_t generation) {
  if (tls_exited) return nullptr;
  ThreadState* ts = tls_state;
  if (ts == nullptr) {
    (void)&tls_exit_hook;  // touch it so its destructor runs at thread exit
    ts = new ThreadState();
    ts->os_tid = os_thread_id();
    ts->node_rng =
        0x9E3779B97F4A7C15ull ^ (uint64_t{ts->os_tid} << 32) ^ reinterpret_cast<uintptr_t>(ts);
    ts->seq_table = SeqMap::instance().table_for(at::RecordFunction::currentThreadId(), ts->os_tid);
    set_up_root(ts->frames[-1]);
    tls_state = ts;
  }
  if (ts->buffer == nullptr) {
    char name[32] = {0};
    pthread_getname_np(pthread_self(), name, sizeof(name));
    ts->buffer = session_state::register_buffer(ts->os_tid, name);
  }
  ts->sampled = session_state::sampled();
  ts->shapes = session_state::shapes();
  ts->cpu_time = session_state::cpu_time();
  ts->graphs_open = 0;
  note_op_extras(ts);
  if (ts->stack_top == 0 && ts->sampled) ts->stack_top = sampled::stack_top();
  ts->generation = generation;
  ts->ready_generation = ts->buffer != nullptr ? generation : ~uint64_t{0};
  ts->depth = 0;  // ranges opened under an earlier session never end here
  ts->step_close_above = 0;
  ts->cpu_chain = false;
  return ts->buffer != nullptr ? ts : nullptr;
}

// The thread is attached to the running session (current_state() needs no slow path).
inline bool attached(const ThreadState* ts) {
  return ts != nullptr && ts->ready_generation == session_state::generation();
}

// The thread has frames open in the running session: an end may close one of them.
inline bool has_open_frames(const ThreadState* ts) {
  return ts != nullptr && ts->depth != 0 && ts->generation == session_state::generation();
}

inline ThreadState* current_state() {
  ThreadState* ts = tls_state;
  if (__builtin_expect(attached(ts), 1)) return ts;
  return attach(session_state::generation());
}

// Is the autograd engine running a graph task on this thread? Only asked for ranges outside any
// node; a thread that never ran a node has no graph task yet (the engine runs a node before
// anything else), which spares the lookup to threads that only ever run forward.
inline bool in_graph_task(const ThreadState* ts) {
  return ts->ran_backward && torch::autograd::get_current_graph_task_id() != -1;
}

// Phase of a scope that is neither an op nor a module's forward. A scope opened in forward can
// still be open while backward runs (record_function("step") around forward and backward): what
// opens inside it from the engine, outside any node (final callbacks), is backward.
Phase scope_phase(const ThreadState* ts, const Frame* parent) {
  if (parent->phase != Phase::kForward) return parent->phase;
  return in_graph_task(ts) ? Phase::kBackward : Phase::kForward;
}

// The phase of an op opened inside `parent` (docs/architecture.md's attribution rules).
inline Phase op_phase_in(const ThreadState* ts, const Frame* parent) {
  return parent->kind == EventKind::kUserScope ? scope_phase(ts, parent) : parent->phase;
}

// Would op_phase_in ask the engine whether a graph task runs? Never on a thread that never ran
// backward, which lets the plain start do without that call.
inline bool asks_engine(const ThreadState* ts, const Frame* parent) {
  return parent->kind == EventKind::kUserScope && parent->phase == Phase::kForward &&
         ts->ran_backward;
}

// Backward ranges: the module whose forward created the node, via (forward thread, seq).
void attribute_node(const at::RecordFunction& fn, Frame& f, const Frame* parent) {
  f.range.node.fwd_thread_id = static_cast<uint32_t>(fn.forwardThreadId());
  uint32_t fqn = 0;
  uint64_t ts = 0;
  uint32_t tid = 0;
  if (SeqMap::instance().lookup(fn.forwardThreadId(), f.range.seq, &fqn, &ts, &tid)) {
    f.range.fqn_id = fqn;
    f.range.node.flow_src_ns = ts;
    f.range.node.flow_src_tid = tid;
  } else {
    f.range.fqn_id = parent->range.fqn_id;
  }
  f.phase = Phase::kBackward;
}

// An op a compiled graph calls directly: the module the call was generated from. Calls that
// recorded nothing (a kernel without a profiling range) are skipped by looking a few ahead.
void name_graph_op(ThreadState* ts, Frame& f) {
  GraphCursor& c = ts->graphs[std::min(ts->graphs_open, kMaxGraphNesting) - 1];
  if (ts->depth != c.depth) return;
  if (ts->sampled) {
    sampled::name_graph_op(c, f);
    return;
  }
  size_t end = std::min<size_t>(c.graph->size(), c.next + kGraphLookahead);
  for (size_t j = c.next; j < end; ++j) {
    if (c.graph->name_id(j) == f.range.name_id) {
      f.range.fqn_id = c.fqns[j];
      c.next = static_cast<uint32_t>(j + 1);
      return;
    }
  }
}

// The issuing c10d op hands its attribution to the backend's work range that runs it later.
void attribute_collective(const at::RecordFunction& fn, const NameInfo& info, Frame& f) {
  collectives::Issued c;
  c.kind_name_id = info.collective_name_id;
  if (info.collective_work) {
    if (collectives::issuer_of_work(session_state::generation(), &c)) {
      f.range.fqn_id = c.fqn_id;
      f.phase = c.phase;
    }
  } else {
    if (fn.needsInputs()) collectives::describe(fn.inputs(), &c.bytes, &c.group_size);
    c.fqn_id = f.range.fqn_id;
    c.phase = f.phase;
    f.issue_mark = collectives::begin_issue(c, session_state::generation());
  }
  f.collective = true;
  f.special_end = true;
  CollectivePayload& p = f.range.collective;
  p.bytes = c.bytes;
  p.group_size = c.group_size;
  p.kind_name_id = c.kind_name_id;
  if (info.collective_work != 0) f.flags |= kCollectiveWork;
  if (f.kind == EventKind::kUserScope) f.flags |= kCollectiveUserScope;
}

// What an op's start needs beyond the common case (a sampled session's op at the top, FLOPs, a
// compiled graph's call, Dynamo's region, a collective, input shapes): out of line, so the
// common start tests one byte and saves no more registers.
__attribute__((noinline)) void special_op_start(const at::RecordFunction& fn, const NameInfo& info,
                                                ThreadState* ts, Frame& f) {
  if (ts->depth == 0 && ts->sampled) {
    if (f.phase == Phase::kBackward) sampled::attribute_to_current_node(f);
    sampled::note_stack_depth(ts, fn, f);
  }
  // Only the outermost FLOP-counted op of a nest counts (convolution, not the _convolution it
  // calls), as FlopCounterMode sees it.
  if (info.flop_kind != 0 && !f.in_flop && fn.needsInputs()) {
    f.range.op.flops = count_flops(static_cast<FlopKind>(info.flop_kind), fn.inputs());
    f.in_flop = true;
  }
  if (__builtin_expect(ts->graphs_open != 0, 0)) name_graph_op(ts, f);
  if (__builtin_expect(info.compiled_region, 0)) {
    // Dynamo runs a module's compiled code: the module is the one being called, which has no
    // frame of its own when its hooks were compiled away (`module.compile()`).
    observer::RegionRootResolver resolve = region_root_resolver.load(std::memory_order_acquire);
    uint32_t root = resolve != nullptr ? resolve() : 0;
    if (root != 0) f.range.fqn_id = root;
  }
  if (info.collective != 0) attribute_collective(fn, info, f);
  if (ts->shapes && fn.needsInputs()) shapes::record(fn.inputs(), f.out_depth, ts->buffer->ring);
}

// The fields every new frame starts with, whatever opened it: `rf` identifies it when it ends.
// Ordered as the frame lays them out, so that the compiler merges neighbouring stores.
inline void begin_frame(Frame& f, const Frame* parent, const at::RecordFunction* rf, int64_t seq,
                        uint64_t rf_id) {
  f.range.seq = seq;
  f.range.op = OpPayload{};  // payloads are 16 B each: clears them all
  f.range.rf_id = rf_id;
  f.out_depth = parent->inner_depth;
  f.flags = 0;
  f.stack_depth = 0;
  f.rf = rf;
  f.inner_depth = f.out_depth + 1;  // a frame that writes nothing sets its own
  f.in_flop = parent->in_flop;
  f.grad = parent->grad;
  f.in_node = parent->in_node;
  f.collective = false;
  f.special_end = false;
  f.cpu = false;
  f.seq_range = false;
  f.cpu_owner = parent->cpu_owner;
  f.issue_mark = 0;
  f.alloc_bytes = 0;
}

// Frame f (opening at index ts->depth) measures CPU time: a module's forward or recompute, or
// an outermost backward op. It starts at the thread's last reading when that is still good for
// it (ThreadState::cpu_chain); a module outside every measuring frame never does, as Python
// that runs between two steps (a data loader's) would otherwise count to the next forward.
__attribute__((noinline)) void start_cpu(ThreadState* ts, Frame& f) {
  f.cpu = true;
  f.special_end = true;
  f.cpu_inside = 0;
  f.cpu_up = f.cpu_owner;
  f.cpu_owner = static_cast<int16_t>(ts->depth);
  bool chainable = f.kind != EventKind::kModule || f.cpu_up >= 0;
  if (chainable && ts->cpu_chain && ts->cpu_chain_owner == f.cpu_up) {
    f.cpu_start = ts->cpu_chain_ns;
  } else {
    f.cpu_start = thread_cpu::now_ns();
  }
  // A submodule opened right away can start here too.
  ts->cpu_chain = true;
  ts->cpu_chain_owner = f.cpu_owner;
  ts->cpu_chain_ns = f.cpu_start;
}

// The end of a measuring frame: its self CPU time, in RawEvent::self_cpu's units; what it spent
// leaves the measuring frame around it.
uint32_t finish_cpu(ThreadState* ts, const Frame& f) {
  uint64_t now = thread_cpu::now_ns();
  uint64_t spent = now > f.cpu_start ? now - f.cpu_start : 0;
  if (f.cpu_up >= 0) ts->frames[f.cpu_up].cpu_inside += spent;
  // The frame around it runs on from this reading: the next measuring frame opened under it
  // (the next backward op, a sibling module) can start here.
  ts->cpu_chain = true;
  ts->cpu_chain_owner = f.cpu_up;
  ts->cpu_chain_ns = now;
  return thread_cpu::to_units(spent > f.cpu_inside ? spent - f.cpu_inside : 0);
}

// The depth of an event written under the thread's innermost open frame (a memory sample).
inline uint8_t depth_inside(const ThreadState* ts) {
  return (ts->frames + ts->depth - 1)->inner_depth;  // the root's at depth 0
}

// The thread's outermost range holds the memory reporter's slot (FQNTRACE_MEMORY); its end gives
// the slot back, so the frame's end is special.
inline bool takes_memory_slot(const ThreadState* ts) { return ts->depth == 0 && memory::enabled(); }
inline void enter_memory_if_outermost(ThreadState* ts, Frame& f) {
  if (takes_memory_slot(ts)) {
    memory::enter(ts->memory_slot);
    f.special_end = true;
  }
}

// Does an outermost cpu_op of this phase measure CPU time (start_cpu)? Sampled mode reads no
// clock per node: two system calls would cost more than its event.
inline bool measures_cpu(const ThreadState* ts, Phase phase) {
  return phase == Phase::kBackward && ts->cpu_time && !ts->sampled;
}

// The last of every range's start (module scopes opened without a RecordFunction too): what
// ranges opened inside inherit, then the clock. kCpuOp: an op, node or engine wrapper, i.e. a
// FUNCTION or BACKWARD_FUNCTION range (known by the caller, so the common start computes none of
// the alternatives).
// kPlain: the caller knows the frame measures no CPU time and that the ticks are the TSC
// (start_plain_op), so the start calls nothing.
template <bool kCpuOp, bool kPlain = false>
__attribute__((always_inline)) inline void finish_start(ThreadState* ts, Frame& f,
                                                        const Frame* parent, bool record_seq) {
  bool parent_in_op = parent->in_op;
  f.in_op = kCpuOp || parent_in_op;
  f.op_phase = kCpuOp ? f.phase : (parent_in_op ? parent->op_phase : f.phase);
  f.op_fqn = kCpuOp ? f.range.fqn_id : (parent_in_op ? parent->op_fqn : f.range.fqn_id);
  if (kCpuOp) {
    bool measured = false;
    if (!parent_in_op) {
      // The frame below stays this range's parent until it ends: outermost cpu_op is known now.
      f.flags |= kTopOp;
      measured = measures_cpu(ts, f.phase);
    }
    if (!kPlain && measured) {
      start_cpu(ts, f);  // may start at the last backward op's end reading
    } else {
      // An op's time is the measuring frame's it runs in, not the next one's: the thread's last
      // reading no longer starts another frame.
      ts->cpu_chain = false;
    }
    if (parent_in_op && (parent->op_phase != f.phase || parent->op_fqn != f.range.fqn_id)) {
      f.flags |= kPhaseTop;
    }
  } else if (f.kind == EventKind::kModule) {
    if (ts->sampled) sampled::open_seq_range(ts, f);
    if (ts->cpu_time) start_cpu(ts, f);
  }
  ++ts->depth;
  // Last: our own bookkeeping stays outside the range's time.
#if defined(__x86_64__)
  f.range.start_ns = kPlain ? __rdtsc() : now_ticks();
#else
  f.range.start_ns = now_ticks();
#endif
  if (record_seq) SeqMap::record(ts->seq_table, f.range.seq, f.range.fqn_id, f.range.start_ns);
}

// An op whose start needs nothing but the common work (start_plain_op's conditions): true once
// it started. False leaves the thread as it was (only the unopened frame above the top is
// written), and start_range starts the range instead.
__attribute__((always_inline)) inline bool start_plain_op(const at::RecordFunction& fn,
                                                          const char* name, ThreadState* ts) {
#if defined(__x86_64__)
  const NameInfo* info = ts->names.known_plain(name, schema_names::epoch());
  if (info == nullptr || ts->op_extras) return false;
  if (takes_memory_slot(ts)) return false;
  Frame* parent = ts->frames + ts->depth - 1;  // the root at depth 0
  // op_phase_in gives the parent's phase when it need not ask the engine.
  if (asks_engine(ts, parent)) return false;
  Phase phase = parent->phase;
  if (measures_cpu(ts, phase) && !parent->in_op) return false;  // start_cpu
  if (!ticks_are_tsc()) return false;
  Frame& f = ts->frames[ts->depth];
  begin_frame(f, parent, &fn, fn.seqNr(), fn.handle());
  f.range.name_id = info->id;
  f.kind = EventKind::kOp;
  f.range.fqn_id = parent->range.fqn_id;
  f.phase = phase;
  finish_start<true, true>(ts, f, parent, f.range.seq >= 0);
  return true;
#else
  return false;
#endif
}

// Any range's start, from the name on (on_start read it).
__attribute__((noinline)) void start_range(const at::RecordFunction& fn, rf_name::Name name) {
  try {
    ThreadState* ts = current_state();
    if (ts == nullptr || ts->depth >= kMaxDepth) return;
    Frame* parent = ts->frames + ts->depth - 1;  // the root at depth 0
    Frame& f = ts->frames[ts->depth];
    begin_frame(f, parent, &fn, fn.seqNr(), fn.handle());
    enter_memory_if_outermost(ts, f);
    // A schema's name by its pointer (only a dispatcher op, FUNCTION, has one); a name
    // RecordFunction copied, which is never at a schema's address, by its bytes.
    const NameInfo& info =
        name.schema && fn.scope() == at::RecordScope::FUNCTION
            ? ts->names.lookup_stable(name.data, name.size, schema_names::epoch(),
                                      schema_names::flops_counted())
            : ts->names.lookup(name.data, name.size);
    f.range.name_id = info.id;
    bool record_seq = false;
    // Ops are most ranges: their case is tested first.
    constexpr long kFunction = static_cast<long>(at::RecordScope::FUNCTION);
    switch (
        static_cast<at::RecordScope>(__builtin_expect(static_cast<long>(fn.scope()), kFunction))) {
      case at::RecordScope::FUNCTION:
        if (info.engine_eval) {
          f.kind = EventKind::kEngineEval;
          ts->ran_backward = true;
          attribute_node(fn, f, parent);
        } else {
          f.kind = EventKind::kOp;
          f.range.fqn_id = parent->range.fqn_id;
          f.phase = op_phase_in(ts, parent);
          // Backward ops too: with create_graph they create the nodes of a double backward.
          record_seq = f.range.seq >= 0;
          if (__builtin_expect(info.special | ts->op_extras, 0)) special_op_start(fn, info, ts, f);
        }
        finish_start<true>(ts, f, parent, record_seq);
        break;
      case at::RecordScope::BACKWARD_FUNCTION:
        f.kind = EventKind::kNode;
        ts->ran_backward = true;
        uint32_t owner;
        if (f.range.seq < 0 && (owner = param_owners::of_current_node()) != 0) {
          // AccumulateGrad has no sequence number: the module owning its parameter.
          f.range.node.fwd_thread_id = static_cast<uint32_t>(fn.forwardThreadId());
          f.range.fqn_id = owner;
          f.phase = Phase::kBackward;
          f.grad = true;
        } else {
          attribute_node(fn, f, parent);
        }
        if (!f.in_node) f.flags |= kTopNode;
        f.in_node = true;
        if (ts->sampled) sampled::pick_node(ts, f);
        // The engine's wrapper opens before the node and carries no sequence number: it takes
        // the node's attribution, so work it does after the node (summing gradients into the
        // next node's input) lands on the same module.
        if (parent->kind == EventKind::kEngineEval && parent->range.seq < 0) {
          parent->range.fqn_id = f.range.fqn_id;
          parent->op_fqn = f.range.fqn_id;
          parent->range.seq = f.range.seq;
          parent->range.node.fwd_thread_id = f.range.node.fwd_thread_id;
        }
        finish_start<true>(ts, f, parent, false);
        break;
      case at::RecordScope::USER_SCOPE:
        if (ts->pending_module_fqn != 0) {
          f.kind = EventKind::kModule;
          f.range.fqn_id = ts->pending_module_fqn;
          f.range.module.type_id = ts->pending_module_type;
          ts->pending_module_fqn = 0;
          // A module's forward that runs while backward does is a recomputation.
          f.phase =
              scope_phase(ts, parent) == Phase::kForward ? Phase::kForward : Phase::kRecompute;
        } else if (ts->pending_serve_fqn != 0) {
          f.kind = EventKind::kServe;
          f.special_end = true;  // writes no event
          f.inner_depth = f.out_depth;
          f.range.fqn_id = ts->pending_serve_fqn;
          ts->pending_serve_fqn = 0;
          f.phase = scope_phase(ts, parent);
        } else {
          f.kind = EventKind::kUserScope;
          f.range.fqn_id = parent->range.fqn_id;
          f.phase = scope_phase(ts, parent);
          // gloo's work ranges ("gloo:all_reduce") are USER_SCOPE ranges on its own threads.
          if (info.collective != 0) attribute_collective(fn, info, f);
          if (ts->shapes && fn.needsInputs()) {
            shapes::record(fn.inputs(), f.out_depth, ts->buffer->ring);
          }
        }
        finish_start<false>(ts, f, parent, false);
        break;
      default:
        return;
    }
  } catch (...) {
    session_state::fail_from_callback("an internal error in the start callback");
  }
}

// The common op (start_plain_op) calls nothing: the name is read inline (plugin/rf_name.h);
// every other range goes to start_range.
std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  rf_name::Name name = rf_name::of(fn);
  ThreadState* ts = tls_state;
  // Attached to the running session (with a buffer), in one compare: not running, or attached to
  // an earlier one, falls through.
  if (__builtin_expect(ts != nullptr &&
                           ts->ready_generation == session_state::running_generation() &&
                           fn.scope() == at::RecordScope::FUNCTION && ts->depth < kMaxDepth,
                       1) &&
      start_plain_op(fn, name.data, ts)) {
    return nullptr;
  }
  if (session_state::running()) start_range(fn, name);
  return nullptr;
}

// The event of frame f, ending at end_ns: the frame starts with it, byte for byte.
inline void fill_event(RawEvent* e, const Frame& f, uint64_t end_ns) {
  std::memcpy(static_cast<void*>(e), &f, sizeof(RawEvent));
  e->range.end_ns = end_ns;
}

// Frame f (at depth i) becomes one event in the thread's ring, written straight into its slot
// (no 64-byte event built here and copied in). Only a special frame can be a collective or have
// allocated bytes (an op's op.alloc_bytes is otherwise still begin_frame's 0).
template <bool kSpecial>
__attribute__((always_inline)) inline void write_event(ThreadState* ts, const Frame& f, uint32_t i,
                                                       uint64_t end_ns, uint32_t self_cpu = 0) {
  EventRing& ring = ts->buffer->ring;
  if (RawEvent* e = ring.claim()) {
    fill_event(e, f, end_ns);
    if (kSpecial) {
      if (f.collective) e->kind = EventKind::kCollective;
      if (f.cpu) e->flags |= kHasCpu;
      e->self_cpu += self_cpu;  // never both (kHasCpu, kStackDepth)
      if (e->kind == EventKind::kOp) e->range.op.alloc_bytes = f.alloc_bytes;
    }
    if (ring.publish() == EventRing::Push::kHalfFull) session_state::wake_drain();
  }
}

// The end of a frame marked special_end: a collective, allocated bytes, the memory slot, a
// serve frame, CPU time.
__attribute__((noinline)) void close_special_frame(ThreadState* ts, uint32_t i, uint64_t end_ns) {
  const Frame& f = ts->frames[i];
  if (f.seq_range) sampled::close_seq_range(ts, i);
  uint32_t self_cpu = f.cpu ? finish_cpu(ts, f) : 0;
  if (f.issue_mark != 0) collectives::end_issue(f.issue_mark);
  if (f.alloc_bytes != 0 && i > 0) {
    ts->frames[i - 1].alloc_bytes += f.alloc_bytes;
    ts->frames[i - 1].special_end = true;
  }
  if (i == 0 && ts->memory_slot.held) memory::leave(ts->memory_slot);
  if (f.kind == EventKind::kServe) return;
  write_event<true>(ts, f, i, end_ns, self_cpu);
}

// Frames above i never reported their end (a range ended on another thread, or entered and
// never exited) and end now, with frame i, innermost first: everything written inside them keeps
// an enclosing range for each level of its depth.
__attribute__((noinline)) void close_abandoned(ThreadState* ts, uint32_t i, uint64_t end_ns) {
  for (uint32_t j = ts->depth - 1; j > i; --j) {
    const Frame& f = ts->frames[j];
    if (f.special_end) {
      close_special_frame(ts, j, end_ns);
    } else {
      write_event<false>(ts, f, j, end_ns);
    }
  }
}

// Frame i ends at `end_ns`, with any frames above it (close_abandoned); the frame becomes one
// event (serve frames none).
// Inlined: on_end calls it for every range, and a call of its own cost a prologue of six saves.
__attribute__((always_inline)) inline void close_frame(ThreadState* ts, uint32_t i,
                                                       uint64_t end_ns) {
  if (__builtin_expect(ts->depth != i + 1, 0)) close_abandoned(ts, i, end_ns);
  ts->depth = i;
  const Frame& f = ts->frames[i];
  if (__builtin_expect(f.special_end, 0)) {
    close_special_frame(ts, i, end_ns);
  } else {
    write_event<false>(ts, f, i, end_ns);
  }
  if (__builtin_expect(i < ts->step_close_above, 0)) {
    // The range the step waited for ended: the step ends with it, around it.
    ts->step_close_above = 0;
    steps::write_range(ts->step_name_id, ts->step_start, end_ns);
  }
}

// Any range's end: the innermost frame or one below it, a special frame, a step waiting, a
// ring that must look at the drain's progress, any clock.
__attribute__((noinline)) void end_range(const at::RecordFunction& fn, uint64_t end_ns) {
  ThreadState* ts = tls_state;
  if (!has_open_frames(ts)) return;
  try {
    uint32_t i = ts->depth;
    if (ts->frames[i - 1].rf != &fn) {
      // Not the innermost: ranges above it were abandoned, or it is not a range we opened (too
      // deep, or opened before the session).
      uint32_t lowest = i > kEndSearch ? i - kEndSearch : 0;
      while (i > lowest && ts->frames[i - 1].rf != &fn) --i;
      if (i == lowest) return;
    }
    close_frame(ts, i - 1, end_ns);
  } catch (...) {
    session_state::fail_from_callback("an internal error in the end callback");
  }
}

// end_range on the monotonic clock, read in here so that the common end keeps no value across
// the call.
__attribute__((noinline)) void end_range_now(const at::RecordFunction& fn) {
  end_range(fn, now_ticks());
}

// The common end (the innermost frame, nothing special, room in the ring) calls nothing before
// its last step, so it needs no registers saved; anything else goes to end_range.
void on_end(const at::RecordFunction& fn, at::ObserverContext*) {
#if defined(__x86_64__)
  if (__builtin_expect(!ticks_are_tsc(), 0)) return end_range_now(fn);
  uint64_t end_ns = __rdtsc();
#else
  uint64_t end_ns = now_ticks();
#endif
  ThreadState* ts = tls_state;
  if (!has_open_frames(ts)) return;
  uint32_t i = ts->depth - 1;
  const Frame& f = ts->frames[i];
  EventRing& ring = ts->buffer->ring;
  RawEvent* e = ring.claim_if_room();
  if (__builtin_expect(f.rf != &fn || f.special_end || i < ts->step_close_above || e == nullptr,
                       0)) {
    return end_range(fn, end_ns);
  }
  ts->depth = i;
  fill_event(e, f, end_ns);
  if (ring.publish() == EventRing::Push::kHalfFull) session_state::wake_drain();
}

}  // namespace

Callbacks install(bool need_inputs, bool need_ids) {
  schema_names::init();
  // FLOPs are counted where the inputs are (special_op_start): without them an op with FLOPs
  // takes the common start.
  schema_names::set_flops_counted(need_inputs);
  auto callback = [&] {
    return at::RecordFunctionCallback(&on_start, &on_end)
        .needsInputs(need_inputs)
        .needsIds(need_ids);
  };
  Callbacks out;
  double p = session_state::sample();
  if (p >= 1.0) {
    out.ops = at::addGlobalCallback(
        callback().scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                           at::RecordScope::USER_SCOPE}));
    return out;
  }
  // torch decides per op, on the op's own thread, with a countdown: an op not picked builds no
  // RecordFunction at all. Nodes (one per several ops, and what backward attribution and the
  // module tracks need) and user scopes (steps, record_function) are not sampled.
  out.ops = at::addGlobalCallback(callback().scopes({at::RecordScope::FUNCTION}).samplingProb(p));
  out.rest = at::addGlobalCallback(
      callback().scopes({at::RecordScope::BACKWARD_FUNCTION, at::RecordScope::USER_SCOPE}));
  return out;
}

void uninstall(Callbacks callbacks) {
  if (callbacks.rest != 0) at::removeCallback(callbacks.rest);
  at::removeCallback(callbacks.ops);
}

bool defer_step_range(uint32_t name_id, uint64_t start_ticks) {
  ThreadState* ts = session_state::running() ? current_state() : nullptr;
  if (ts == nullptr || ts->depth == 0) return false;
  ts->step_close_above = ts->depth;
  ts->step_name_id = name_id;
  ts->step_start = start_ticks;
  return true;
}

void set_pending_module(uint32_t fqn_id, uint32_t type_id) {
  ThreadState* ts = session_state::running() ? current_state() : nullptr;
  if (ts == nullptr) return;
  ts->pending_module_fqn = fqn_id;
  ts->pending_module_type = type_id;
}

void set_pending_serve(uint32_t fqn_id) {
  ThreadState* ts = session_state::running() ? current_state() : nullptr;
  if (ts != nullptr) ts->pending_serve_fqn = fqn_id;
}

void clear_pending_module() {
  if (tls_state != nullptr) tls_state->pending_module_fqn = tls_state->pending_serve_fqn = 0;
}

bool open_scope(ScopeKind kind, uint32_t fqn_id, uint32_t type_id, uint32_t name_id) noexcept {
  if (!session_state::recording()) return false;
  try {
    ThreadState* ts = current_state();
    if (ts == nullptr || ts->depth >= kMaxDepth) return false;
    Frame* parent = ts->frames + ts->depth - 1;  // the root at depth 0
    if (kind == ScopeKind::kModule) {
      // torch.compile(m) calls its wrapper and then `m` itself, both named alike: one scope.
      for (uint32_t i = ts->depth; i > 0 && i + kEndSearch > ts->depth; --i) {
        const Frame& below = ts->frames[i - 1];
        if (below.kind == EventKind::kModule) {
          if (below.range.fqn_id == fqn_id) return false;
          break;
        }
      }
    }
    Frame& f = ts->frames[ts->depth];
    // No RecordFunction: no sequence number, nothing of torch.profiler's to join with.
    begin_frame(f, parent, kDirectScope, -1, 0);
    enter_memory_if_outermost(ts, f);
    f.range.name_id = name_id;
    f.range.fqn_id = fqn_id;
    Phase phase = scope_phase(ts, parent);
    if (kind == ScopeKind::kModule) {
      f.kind = EventKind::kModule;
      f.range.module.type_id = type_id;
      // A module's forward that runs while backward does is a recomputation.
      f.phase = phase == Phase::kForward ? Phase::kForward : Phase::kRecompute;
    } else {
      f.kind = EventKind::kServe;
      f.special_end = true;  // writes no event
      f.inner_depth = f.out_depth;
      f.phase = phase;
    }
    finish_start<false>(ts, f, parent, false);
    return true;
  } catch (...) {
    session_state::fail_from_callback("an internal error while opening a module scope");
    return false;
  }
}

void close_scope() noexcept {
  uint64_t end_ns = now_ticks();
  ThreadState* ts = tls_state;
  if (!has_open_frames(ts)) return;
  try {
    // Scopes nest with the calls that open them: the innermost direct frame is this one. Ranges
    // still open above it (a record_function entered and never exited) are abandoned.
    uint32_t i = ts->depth;
    while (i > 0 && ts->frames[i - 1].rf != kDirectScope) --i;
    if (i > 0) close_frame(ts, i - 1, end_ns);
  } catch (...) {
    session_state::fail_from_callback("an internal error while closing a module scope");
  }
}

void record_memory(uint64_t ptr, int64_t bytes, uint64_t total_allocated, uint64_t total_reserved,
                   int8_t device_type, int8_t device_index) noexcept {
  ThreadState* ts = tls_state;
  if (ts == nullptr || ts->buffer == nullptr || !session_state::running() ||
      ts->generation != session_state::generation()) {
    return;
  }
  try {
    RawEvent e;
    MemorySample& m = e.memory;
    m.ts = now_ticks();
    m.ptr = ptr;
    m.bytes = bytes;
    m.total_allocated = total_allocated;
    m.total_reserved = total_reserved;
    m.device_type = device_type;
    m.device_index = device_index;
    e.kind = EventKind::kMemory;
    e.depth = depth_inside(ts);
    e.flags = 0;
    if (ts->depth > 0) {
      Frame& f = ts->frames[ts->depth - 1];
      m.fqn_id = f.range.fqn_id;
      e.phase = f.phase;
      if (f.grad) e.flags = kMemGrad;
      if (bytes > 0) {
        f.alloc_bytes += static_cast<uint64_t>(bytes);
        f.special_end = true;
      }
    } else {
      // Our reporter carried to a thread between ranges (at::ThreadLocalState): as an op there.
      m.fqn_id = kGlobalFqnId;
      e.phase = in_graph_task(ts) ? Phase::kBackward : Phase::kForward;
    }
    if (ts->buffer->ring.push(e) == EventRing::Push::kHalfFull) session_state::wake_drain();
  } catch (...) {
    session_state::fail_from_callback("an internal error in the memory reporter");
  }
}

void yield_memory_slot() noexcept {
  if (tls_state != nullptr) memory::leave(tls_state->memory_slot);
}

void set_compiled_region_resolver(RegionRootResolver resolver) {
  region_root_resolver.store(resolver, std::memory_order_release);
}

void enter_compiled_graph(CompiledGraph* graph) {
  ThreadState* ts = session_state::running() ? current_state() : nullptr;
  if (ts == nullptr) return;
  if (ts->graphs_open < kMaxGraphNesting && graph != nullptr) {
    uint32_t root = ts->depth > 0 ? ts->frames[ts->depth - 1].range.fqn_id : kGlobalFqnId;
    ts->graphs[ts->graphs_open] = GraphCursor{graph, graph->fqns_under(root), ts->depth, 0};
  }
  ++ts->graphs_open;
  note_op_extras(ts);
}

void exit_compiled_graph() {
  ThreadState* ts = tls_state;
  if (ts != nullptr && ts->graphs_open > 0) {
    --ts->graphs_open;
    note_op_extras(ts);
  }
}
}  // namespace fqntrace::observer

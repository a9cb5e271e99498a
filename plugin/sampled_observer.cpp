#include "plugin/sampled_observer.h"

#include <ATen/SequenceNumber.h>
#include <pthread.h>
#include <torch/csrc/autograd/node.h>

#include "plugin/compiled_graph.h"
#include "plugin/param_owners.h"
#include "plugin/seq_map.h"

namespace fqntrace::observer::sampled {

uintptr_t stack_top() {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return 0;
  void* low = nullptr;
  size_t size = 0;
  uintptr_t top =
      pthread_attr_getstack(&attr, &low, &size) == 0 ? reinterpret_cast<uintptr_t>(low) + size : 0;
  pthread_attr_destroy(&attr);
  return top;
}

void attribute_to_current_node(Frame& f) {
  c10::intrusive_ptr<torch::autograd::Node> node = torch::autograd::get_current_node();
  if (!node) return;
  uint32_t fqn = 0;
  uint64_t start = 0;
  uint32_t tid = 0;
  uint64_t seq = node->sequence_nr();
  if (seq == UINT64_MAX) {
    fqn = param_owners::of_current_node();  // AccumulateGrad: no sequence number
  } else {
    SeqMap::instance().lookup(node->thread_id(), static_cast<int64_t>(seq), &fqn, &start, &tid);
  }
  if (fqn != 0) f.range.fqn_id = fqn;
}

void fill_seq(const ThreadState* ts, int64_t from, int64_t to, uint32_t fqn_id) {
  if (ts->seq_table == nullptr) return;
  constexpr int64_t kSlots = int64_t{1} << SeqMap::kSlotsLog2;
  if (to - from > kSlots) from = to - kSlots;  // older numbers' slots are taken again anyway
  for (int64_t seq = from; seq < to; ++seq) SeqMap::fill(ts->seq_table, seq, fqn_id);
}

void name_graph_op(const GraphCursor& c, Frame& f) {
  size_t j = c.graph->only_call_named(f.range.name_id);
  if (j != CompiledGraph::kNotUnique) f.range.fqn_id = c.fqns[j];
}

void open_seq_range(ThreadState* ts, Frame& f) {
  int64_t now = static_cast<int64_t>(at::sequence_number::peek());
  if (Frame* up = enclosing_seq_range(ts, ts->depth)) {
    fill_seq(ts, up->seq_next, now, up->range.fqn_id);
    up->seq_next = now;
  }
  f.seq_range = true;
  f.seq_next = now;
  f.special_end = true;
}

}  // namespace fqntrace::observer::sampled

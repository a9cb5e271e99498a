#include "tests/support/event_mix.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "buffer/intern.h"

namespace fqntrace::mix {
namespace {

uint32_t id(const std::string& s) { return InternTable::instance().intern(s); }

// The mix's collectives are all ops (no USER_SCOPE work ranges).
bool is_cpu_op_kind(EventKind k) {
  return k == EventKind::kOp || k == EventKind::kNode || k == EventKind::kEngineEval ||
         k == EventKind::kCollective;
}

// A forward op that created an autograd node, remembered for the backward pass.
struct Created {
  int64_t seq;
  uint64_t fwd_start_ns;
  uint32_t fqn_id;
  std::string node;                  // "AddmmBackward0"
  std::vector<std::string> bwd_ops;  // what the node runs
  uint64_t flops = 0;                // FLOPs of its backward ops (first of them)
};

// Records ranges as the observer would: opened and closed in order on each thread, emitted at
// close (end order), with depth, kTopOp and a deterministic virtual clock.
class Builder {
 public:
  explicit Builder(std::vector<MixEvent>* out, MixCounts* counts) : out_(out), counts_(counts) {}

  uint64_t now() const { return now_; }

  // Pseudo-random nanoseconds in [lo, hi): gaps between ranges and leaf-op durations.
  uint64_t rand(uint64_t lo, uint64_t hi) {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (state_ >> 33) % (hi - lo);
  }
  void pass(uint64_t lo, uint64_t hi) { now_ += rand(lo, hi); }

  RawEvent& open(EventKind kind, uint32_t name, uint32_t fqn, Phase phase, int thread = 0) {
    pass(300, 2000);
    RawEvent e{};
    e.range.start_ns = now_;
    e.range.seq = -1;
    e.range.name_id = name;
    e.range.fqn_id = fqn;
    e.kind = kind;
    e.phase = phase;
    auto& stack = stacks_[thread];
    e.depth = static_cast<uint8_t>(stack.size());
    bool inside_op = false;
    for (const auto& s : stack) inside_op = inside_op || is_cpu_op_kind(s.kind);
    if (is_cpu_op_kind(kind) && !inside_op) e.flags |= kTopOp;
    stack.push_back(e);
    return stack.back();
  }

  void close(int thread = 0) {
    pass(200, 1500);
    auto& stack = stacks_[thread];
    RawEvent e = stack.back();
    stack.pop_back();
    e.range.end_ns = now_;
    switch (e.kind) {
      case EventKind::kOp:
        ++counts_->ops;
        break;
      case EventKind::kCollective:
        ++counts_->ops;
        ++counts_->collectives;
        break;
      case EventKind::kModule:
        ++counts_->modules;
        break;
      case EventKind::kNode:
        ++counts_->nodes;
        if (e.range.node.flow_src_ns != 0) ++counts_->flows;
        break;
      case EventKind::kEngineEval:
        ++counts_->engine;
        break;
      case EventKind::kUserScope:
        ++counts_->user_scopes;
        break;
      case EventKind::kShapes:
      case EventKind::kServe:
      case EventKind::kMemory:
      case EventKind::kModuleSpan:
        break;  // none is ever a written range
    }
    out_->push_back({thread, e});
  }

  // A leaf op: opened, runs for a while, closed.
  RawEvent& leaf_open(const std::string& name, uint32_t fqn, Phase phase) {
    return open(EventKind::kOp, id(name), fqn, phase);
  }
  void leaf(const std::string& name, uint32_t fqn, Phase phase, uint64_t flops = 0) {
    RawEvent& e = leaf_open(name, fqn, phase);
    e.range.op.flops = flops;
    pass(2000, 60000);
    close();
  }

 private:
  std::vector<MixEvent>* out_;
  MixCounts* counts_;
  std::vector<RawEvent> stacks_[kMixThreads];
  uint64_t now_ = EventMix::origin_ns() + 3'217'000'000ull;  // the step starts 3.2 s into the trace
  uint64_t state_ = 0x2545F4914F6CDD1Dull;
};

constexpr uint32_t kFwdThread = 1;  // RecordFunction's logical id of the training thread

class StepWriter {
 public:
  StepWriter(Builder& b, int layers, bool collectives)
      : b_(b), layers_(layers), collectives_(collectives) {}

  int64_t seqs() const { return next_seq_; }

  void run() {
    uint32_t root = module_open("TinyTransformer", "TinyTransformer", kNoParent);
    embedding(root, "TinyTransformer.embed");
    embedding(root, "TinyTransformer.pos");
    op_with_node("aten::add", root, "AddBackward0", {});
    for (int i = 0; i < layers_; ++i) block("TinyTransformer.layers." + std::to_string(i));
    layer_norm("TinyTransformer.norm");
    linear("TinyTransformer.head", 1024, 512, 256);
    b_.close();  // TinyTransformer

    // Loss, under Global.
    uint32_t global = kGlobalFqnId;
    b_.open(EventKind::kOp, id("aten::cross_entropy_loss"), global, Phase::kForward);
    b_.open(EventKind::kOp, id("aten::log_softmax"), global, Phase::kForward);
    created_op("aten::_log_softmax", global, "LogSoftmaxBackward0",
               {"aten::_log_softmax_backward_data"});
    b_.close();
    b_.open(EventKind::kOp, id("aten::nll_loss_nd"), global, Phase::kForward);
    b_.open(EventKind::kOp, id("aten::nll_loss"), global, Phase::kForward);
    created_op("aten::nll_loss_forward", global, "NllLossBackward0", {"aten::nll_loss_backward"});
    b_.close();
    b_.close();
    b_.close();

    backward();
    optimizer();
  }

 private:
  static constexpr uint32_t kNoParent = 0xFFFFFFFF;

  uint32_t module_open(const std::string& fqn, const std::string& type, uint32_t) {
    uint32_t fqn_id = id(fqn);
    RawEvent& e = b_.open(EventKind::kModule, id("nn.Module: " + fqn), fqn_id, Phase::kForward);
    e.range.module.type_id = id(type);
    return fqn_id;
  }

  // A forward op that creates an autograd node: gets a sequence number, remembered for backward.
  void created_op(const std::string& name, uint32_t fqn, const std::string& node,
                  std::vector<std::string> bwd_ops, uint64_t flops = 0, uint64_t bwd_flops = 0) {
    RawEvent& e = b_.leaf_open(name, fqn, Phase::kForward);
    e.range.seq = next_seq_++;
    e.range.op.flops = flops;
    created_.push_back({e.range.seq, e.range.start_ns, fqn, node, std::move(bwd_ops), bwd_flops});
    b_.pass(2000, 60000);
    b_.close();
  }
  void op_with_node(const std::string& name, uint32_t fqn, const std::string& node,
                    std::vector<std::string> bwd_ops) {
    created_op(name, fqn, node, std::move(bwd_ops));
  }

  void linear(const std::string& fqn, uint64_t m, uint64_t n, uint64_t k) {
    uint32_t f = module_open(fqn, "Linear", 0);
    b_.open(EventKind::kOp, id("aten::linear"), f, Phase::kForward);
    b_.open(EventKind::kOp, id("aten::t"), f, Phase::kForward).range.seq = next_seq_;
    created_.push_back({next_seq_++, b_.now(), f, "TBackward0", {"aten::t"}});
    b_.leaf("aten::transpose", f, Phase::kForward);
    b_.close();
    created_op("aten::addmm", f, "AddmmBackward0",
               {"aten::mm", "aten::t", "aten::mm", "aten::sum", "aten::view"}, 2 * m * n * k,
               4 * m * n * k);
    b_.close();  // linear
    b_.close();  // module
    params_.push_back(f);
    params_.push_back(f);  // weight and bias
  }

  void layer_norm(const std::string& fqn) {
    uint32_t f = module_open(fqn, "LayerNorm", 0);
    b_.open(EventKind::kOp, id("aten::layer_norm"), f, Phase::kForward);
    created_op("aten::native_layer_norm", f, "NativeLayerNormBackward0",
               {"aten::native_layer_norm_backward"});
    b_.close();
    b_.close();
    params_.push_back(f);
    params_.push_back(f);
  }

  void embedding(uint32_t, const std::string& fqn) {
    uint32_t f = module_open(fqn, "Embedding", 0);
    b_.open(EventKind::kOp, id("aten::embedding"), f, Phase::kForward).range.seq = next_seq_;
    created_.push_back(
        {next_seq_++,
         b_.now(),
         f,
         "EmbeddingBackward0",
         {"aten::embedding_backward", "aten::embedding_dense_backward", "aten::index_add_"}});
    b_.leaf("aten::index_select", f, Phase::kForward);
    b_.close();
    b_.close();
    params_.push_back(f);
  }

  void block(const std::string& fqn) {
    uint32_t f = module_open(fqn, "Block", 0);
    layer_norm(fqn + ".ln1");
    {
      std::string a = fqn + ".attn";
      uint32_t af = module_open(a, "Attention", 0);
      linear(a + ".qkv", 1024, 768, 256);
      created_op("aten::view", af, "ViewBackward0", {"aten::reshape", "aten::view"});
      created_op("aten::split", af, "SplitBackward0", {"aten::cat"});
      for (int t = 0; t < 3; ++t)
        created_op("aten::transpose", af, "TransposeBackward0", {"aten::transpose"});
      b_.open(EventKind::kOp, id("aten::scaled_dot_product_attention"), af, Phase::kForward);
      created_op("aten::_scaled_dot_product_flash_attention_for_cpu", af,
                 "ScaledDotProductFlashAttentionForCpuBackward0",
                 {"aten::_scaled_dot_product_flash_attention_for_cpu_backward"}, 268435456,
                 671088640);
      b_.close();
      created_op("aten::transpose", af, "TransposeBackward0", {"aten::transpose"});
      b_.open(EventKind::kOp, id("aten::reshape"), af, Phase::kForward);
      b_.leaf("aten::clone", af, Phase::kForward);
      created_op("aten::_unsafe_view", af, "UnsafeViewBackward0", {"aten::view"});
      b_.close();
      linear(a + ".proj", 1024, 256, 256);
      b_.close();
    }
    op_with_node("aten::add", f, "AddBackward0", {});
    layer_norm(fqn + ".ln2");
    {
      std::string m = fqn + ".mlp";
      module_open(m, "MLP", 0);
      linear(m + ".fc1", 1024, 1024, 256);
      uint32_t act = module_open(m + ".act", "GELU", 0);
      created_op("aten::gelu", act, "GeluBackward0", {"aten::gelu_backward"});
      b_.close();
      linear(m + ".fc2", 1024, 256, 1024);
      b_.close();
    }
    op_with_node("aten::add", f, "AddBackward0", {});
    b_.close();  // block
  }

  void backward() {
    // Backward runs on the training thread (CPU), nodes in reverse creation order. Each node
    // runs inside the engine's wrapper; its ops have no sequence number (no create_graph).
    size_t bucket_every = created_.size() / 2 + 1;
    size_t done = 0;
    for (auto it = created_.rbegin(); it != created_.rend(); ++it, ++done) {
      uint32_t wrapper = id("autograd::engine::evaluate_function: " + it->node);
      RawEvent& w = b_.open(EventKind::kEngineEval, wrapper, it->fqn_id, Phase::kBackward);
      w.range.seq = it->seq;
      w.range.node = {it->fwd_start_ns, EventMix::tid(0), kFwdThread};
      RawEvent& n = b_.open(EventKind::kNode, id(it->node), it->fqn_id, Phase::kBackward);
      n.range.seq = it->seq;
      n.range.node = {it->fwd_start_ns, EventMix::tid(0), kFwdThread};
      bool first = true;
      for (const auto& op : it->bwd_ops) {
        b_.leaf(op, it->fqn_id, Phase::kBackward, first ? it->flops : 0);
        first = false;
      }
      b_.close();  // node
      b_.close();  // wrapper
      if (collectives_ && (done + 1) % bucket_every == 0) allreduce(it->fqn_id);
    }
    // AccumulateGrad: one per parameter, no sequence number, attributed to the owning module.
    for (auto it = params_.rbegin(); it != params_.rend(); ++it) {
      b_.open(EventKind::kEngineEval,
              id("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"), *it,
              Phase::kBackward)
          .range.node.fwd_thread_id = kFwdThread;
      b_.open(EventKind::kNode, id("torch::autograd::AccumulateGrad"), *it, Phase::kBackward)
          .range.node.fwd_thread_id = kFwdThread;
      b_.leaf("aten::detach", *it, Phase::kBackward);
      b_.close();
      b_.close();
    }
  }

  // A DDP bucket: the issuing c10d op on the training thread, then the backend's work range on
  // the communication thread, overlapping the rest of the backward.
  void allreduce(uint32_t fqn) {
    uint64_t bytes = 25ull << 20;
    RawEvent& c = b_.open(EventKind::kCollective, id("c10d::allreduce_"), fqn, Phase::kBackward);
    c.range.collective = {bytes, 2, id("allreduce")};
    b_.pass(5000, 20000);
    b_.close();
    RawEvent& w = b_.open(EventKind::kCollective, id("gloo:all_reduce"), fqn, Phase::kBackward, 1);
    w.range.collective = {bytes, 2, id("allreduce")};
    w.flags |= kCollectiveWork;
    b_.pass(200000, 900000);
    b_.close(1);
  }

  void optimizer() {
    uint32_t g = kGlobalFqnId;
    b_.open(EventKind::kUserScope, id("Optimizer.step#AdamW.step"), g, Phase::kForward);
    for (const char* op : {"aten::_foreach_add_", "aten::_foreach_lerp_", "aten::_foreach_mul_",
                           "aten::_foreach_addcmul_", "aten::_foreach_sqrt", "aten::_foreach_div_",
                           "aten::_foreach_add_", "aten::_foreach_addcdiv_"}) {
      b_.leaf(op, g, Phase::kForward);
    }
    b_.close();
    b_.open(EventKind::kUserScope, id("Optimizer.zero_grad#AdamW.zero_grad"), g, Phase::kForward);
    b_.pass(1000, 5000);
    b_.close();
  }

  Builder& b_;
  int layers_;
  bool collectives_;
  int64_t next_seq_ = 1000;
  std::vector<Created> created_;
  std::vector<uint32_t> params_;
};

}  // namespace

EventMix::EventMix(int layers, bool collectives) {
  Builder b(&step_, &counts_);
  uint64_t start = b.now();
  StepWriter w(b, layers, collectives);
  w.run();
  b.pass(50000, 100000);  // data loading between steps
  step_ns_ = b.now() - start;
  seqs_per_step_ = w.seqs();
}

namespace {

void die(const std::string& error) {
  std::fprintf(stderr, "exporter_bench: %s\n", error.c_str());
  std::exit(1);
}

// A path ending in .gz that discards what is written (a symbolic link to /dev/null).
std::string null_gz_path() {
  std::string path = "/tmp/fqntrace-null-" + std::to_string(::getpid()) + ".json.gz";
  ::unlink(path.c_str());
  if (::symlink("/dev/null", path.c_str()) != 0) die("cannot create " + path);
  return path;
}

}  // namespace

MixPipeline::MixPipeline(const std::string& format, const std::string& path) {
  std::vector<std::unique_ptr<Exporter>> exporters;
  auto add = [&](std::unique_ptr<Exporter> ex, const std::string& p) {
    TraceInfo info;
    info.path = p;
    info.trace_name = "bench.json";
    info.pid = 1843107;
    info.process_name = "python";
    info.version = "bench";
    info.base_time_ns = 1'790'000'000'000'000'000ull;
    info.mono_origin_ns = EventMix::origin_ns();
    std::string error;
    if (!ex->open(info, &error)) die(error);
    paths_.push_back(p);
    exporters.push_back(std::move(ex));
  };
  bool dev_null = path == "/dev/null";
  // chrome_nospans: the Chrome trace without the drain's module spans (what they cost, P4).
  bool spans = format != "chrome_nospans";
  if (format == "chrome" || format == "all" || !spans) add(make_chrome_trace_exporter(), path);
  if (format == "jsonl" || format == "all")
    add(make_json_lines_exporter(), dev_null ? path : path + ".jsonl");
  // gzip outputs are chosen by the .gz suffix: to discard them, a .gz name that is /dev/null.
  if (format == "chrome_gz")
    add(make_chrome_trace_exporter(), dev_null ? null_gz_path() : path + ".gz");
  if (format == "jsonl_gz") {
    add(make_json_lines_exporter(), dev_null ? null_gz_path() : path + ".jsonl.gz");
  }
  if (exporters.empty()) {
    die("unknown format '" + format +
        "' (chrome, jsonl, all, chrome_gz, jsonl_gz, chrome_nospans)");
  }
  drainer_ = std::make_unique<Drainer>(std::move(exporters), EventMix::origin_ns(),
                                       /*shapes=*/false, spans);
  drainer_->start_clock();  // the mix's times are ns already: no tick source chosen, identity
  for (int t = 0; t < kMixThreads; ++t) {
    buffers_.push_back(std::make_unique<ThreadBuffer>(EventMix::tid(t), "", /*capacity_log2=*/16));
  }
}

void MixPipeline::push_step(uint64_t k) {
  for (const MixEvent& m : mix_.step()) buffers_[m.thread]->ring.push(mix_.at_step(m.raw, k));
}

uint64_t MixPipeline::drain() {
  drainer_->begin_batch();
  uint64_t n = 0;
  for (auto& b : buffers_) n += drainer_->drain(*b);
  return n;
}

void MixPipeline::flush() {
  std::string error;
  if (!drainer_->flush(&error)) die(error);
}

void MixPipeline::finish() {
  std::vector<std::string> errors = drainer_->finish(/*dropped_events=*/0);
  if (!errors.empty()) die(errors.front());
}

}  // namespace fqntrace::mix

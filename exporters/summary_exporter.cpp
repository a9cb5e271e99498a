// Per-module summary, written beside the trace at the end (<stem>.summary.json): for every fqn
// and phase, total and self time, op count, FLOPs and the top ops by time. Self time is the time
// of the outermost cpu_ops attributed to exactly that fqn, so self times add up to the traced
// op time; a module's total is its self time plus its descendants' (fqn prefix), so a parent's
// total covers its children. Memory is bounded by (modules × phases × distinct op names).
#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <unordered_map>
#include <vector>

#include "exporters/exporter.h"
#include "exporters/json_text.h"
#include "exporters/memory_stats.h"
#include "exporters/output_file.h"
#include "exporters/step_times.h"

namespace fqntrace {
namespace {

constexpr int kPhases = 3;
constexpr size_t kTopOps = 5;

struct OpStats {
  const std::string* name = nullptr;  // interned: valid until finish (EventRecord)
  uint64_t ns = 0;
  uint64_t count = 0;
};

struct PhaseStats {
  uint64_t self_ns = 0;
  uint64_t ops = 0;
  uint64_t flops = 0;
  uint64_t comm_ns = 0;       // backend work ranges (the data moving), on their own threads
  uint64_t comm_bytes = 0;    // bytes the issuing c10d ops hand to the backend
  uint64_t collectives = 0;   // issuing c10d ops
  std::unordered_map<uint32_t, OpStats> top_level_ops;  // name id → time of outermost ops
};

struct PendingTime {
  std::array<uint64_t, 256> ns{};  // by depth: time of phase-boundary ops not yet taken out
  size_t high = 0;                  // ns[high...] are all zero
};

struct ModuleStats {
  const std::string* fqn = nullptr;          // interned, as OpStats::name
  const std::string* module_type = nullptr;  // its class, once a module event was seen
  uint64_t calls = 0;
  PhaseStats phase[kPhases];
};

void append_memory(std::string& out, const MemoryStats::Numbers& n) {
  out += ", \"alloc_bytes\": ";
  json::append_uint(out, n.alloc);
  out += ", \"freed_bytes\": ";
  json::append_uint(out, n.freed);
  out += ", \"peak_bytes\": ";
  json::append_uint(out, n.peak);
  out += ", \"activation_bytes\": ";
  json::append_uint(out, n.activation);
  out += ", \"grad_bytes\": ";
  json::append_uint(out, n.grad);
}

class SummaryExporter final : public Exporter {
 public:
  bool open(const TraceInfo& info, std::string* error) override {
    info_ = info;
    // Open now so a bad path is reported at start, not at exit.
    return file_.open(info.path, error);
  }

  void thread_seen(uint32_t, const std::string&) override {}

  void process_group_known(const TraceInfo& group) override {
    info_.backend = group.backend;
    info_.rank = group.rank;
    info_.world_size = group.world_size;
  }

  bool move_to(const std::string& path, std::string* error) override { return file_.move_to(path, error); }

  void event(const EventRecord& e) override {
    const RawEvent& r = e.raw;
    if (r.kind == EventKind::kModuleSpan) return;  // a view of ranges already counted
    if (r.kind == EventKind::kMemory) {
      ModuleStats& m = modules_[r.memory.fqn_id];
      if (m.fqn == nullptr) m.fqn = &e.fqn;
      memory_.sample(e.tid, e.fqn, static_cast<int>(r.phase), r.memory.ptr, r.memory.bytes);
      return;
    }
    ModuleStats& m = modules_[r.range.fqn_id];
    if (m.fqn == nullptr) m.fqn = &e.fqn;
    if (r.kind == EventKind::kModule) {
      m.module_type = &e.module_type;
      if (r.phase == Phase::kForward) ++m.calls;
      if (info_.memory) memory_.module_end(e.tid, e.fqn, static_cast<int>(r.phase));
      return;
    }
    PhaseStats& p = m.phase[static_cast<int>(r.phase)];
    if (r.kind == EventKind::kCollective) {
      const CollectivePayload& c = r.range.collective;
      if ((r.flags & kCollectiveWork) != 0) {
        p.comm_ns += e.dur_ns;  // not compute: it runs beside the training thread
        return;
      }
      if ((r.flags & kCollectiveUserScope) != 0) return;
      p.comm_bytes += c.bytes;
      ++p.collectives;
      ++p.ops;  // an issuing c10d op is an op like any other
    } else if (r.kind == EventKind::kUserScope) {
      static const std::string kStep = "ProfilerStep#";
      if (e.name.compare(0, kStep.size(), kStep) == 0) {
        steps_.step_range(std::strtoull(e.name.c_str() + kStep.size(), nullptr, 10), e.ts_ns,
                          e.ts_ns + e.dur_ns);
      }
      return;
    } else if (r.kind == EventKind::kOp) {
      p.flops += r.range.op.flops;
      ++p.ops;
    }
    if (r.flags & (kTopOp | kPhaseTop)) {
      // Time of phase-boundary ops inside this one (recompute inside a backward node) is
      // theirs, not this op's. Events arrive in end order, so they were all seen already.
      PendingTime& pending = pending_[e.tid];
      uint64_t excluded = 0;
      for (size_t d = r.depth + 1u; d < pending.high; ++d) {
        excluded += pending.ns[d];
        pending.ns[d] = 0;
      }
      pending.high = std::min<size_t>(pending.high, r.depth + 1u);
      uint64_t own = e.dur_ns - std::min(excluded, e.dur_ns);
      if (r.flags & kPhaseTop) {
        pending.ns[r.depth] += e.dur_ns;
        pending.high = r.depth + 1u;
      }
      p.self_ns += own;
      steps_.op(e.ts_ns, r.range.fqn_id, static_cast<int>(r.phase), own);
      OpStats& op = p.top_level_ops[r.range.name_id];
      if (op.name == nullptr) op.name = &e.name;
      op.ns += own;
      ++op.count;
    }
  }

  bool flush(std::string*) override { return true; }

  bool finish(const FinishInfo& fin, std::string* error) override {
    std::map<std::string, const ModuleStats*> by_fqn;  // sorted: parents before children
    for (const auto& [id, stats] : modules_) by_fqn[*stats.fqn] = &stats;
    // Containers that never run a forward of their own (a ModuleList) still get a row, so every
    // level of the tree has its total.
    static const ModuleStats kNoOwnWork;
    std::vector<std::string> ancestors;
    for (const auto& [fqn, stats] : by_fqn) {
      for (size_t dot = fqn.find('.'); dot != std::string::npos; dot = fqn.find('.', dot + 1)) {
        ancestors.push_back(fqn.substr(0, dot));
      }
    }
    for (const auto& a : ancestors) by_fqn.emplace(a, &kNoOwnWork);
    uint64_t traced_ns = 0;
    for (const auto& [fqn, stats] : by_fqn) {
      for (const auto& p : stats->phase) traced_ns += p.self_ns;
    }
    std::string out = "{\"trace\": ";
    json::append_string(out, info_.trace_name);
    out += ", \"rank\": ";
    json::append_int(out, info_.rank);
    out += ", \"step_ms\": ";
    json::append_ms(out, traced_ns);
    out += ", \"dropped_events\": ";
    json::append_uint(out, fin.dropped_events);
    StepTimes::Medians step_medians;  // per-step medians, when the trace has steps
    StepTimes::Samples step_samples;  // own time per kept step
    StepTimes::Spreads step_spreads;  // step-to-step spread of the subtree time
    std::unordered_map<uint32_t, const std::string*> fqn_of;
    for (const auto& [id, stats] : modules_) fqn_of[id] = stats.fqn;
    steps_.finish(fqn_of, kPhases, &out, &step_medians, &step_samples, &step_spreads);
    memory_.finish();
    out += ", \"modules\": {";
    bool first_module = true;
    for (auto it = by_fqn.begin(); it != by_fqn.end(); ++it) {
      const std::string& fqn = it->first;
      const ModuleStats& m = *it->second;
      if (!first_module) out += ",";
      first_module = false;
      out += "\n  ";
      json::append_string(out, fqn);
      out += ": {\"module_type\": ";
      json::append_string(out, m.module_type != nullptr ? *m.module_type : std::string());
      out += ", \"calls\": ";
      json::append_uint(out, m.calls);
      for (int ph = 0; ph < kPhases; ++ph) {
        // Descendants follow their parent in sorted order and share the "fqn." prefix.
        uint64_t total_ns = 0, total_ops = 0, total_flops = 0;
        MemoryStats::Numbers mem;  // summed over the subtree, but the peak: the module's own
        for (auto d = it; d != by_fqn.end(); ++d) {
          if (d != it && (d->first.size() <= fqn.size() || d->first.compare(0, fqn.size(), fqn) != 0 ||
                          d->first[fqn.size()] != '.')) {
            if (d->first.compare(0, fqn.size(), fqn) != 0) break;
            continue;
          }
          const PhaseStats& p = d->second->phase[ph];
          total_ns += p.self_ns;
          total_ops += p.ops;
          total_flops += p.flops;
          if (const MemoryStats::Numbers* n = memory_.find(d->first, ph)) {
            mem.alloc += n->alloc;
            mem.freed += n->freed;
            mem.activation += n->activation;
            mem.grad += n->grad;
          }
        }
        if (const MemoryStats::Numbers* n = memory_.find(fqn, ph)) mem.peak = n->peak;
        const PhaseStats& p = m.phase[ph];
        out += ", \"";
        out += phase_name(static_cast<Phase>(ph));
        out += "\": {\"total_ms\": ";
        json::append_ms(out, total_ns);
        out += ", \"self_ms\": ";
        json::append_ms(out, p.self_ns);
        out += ", \"ops\": ";
        json::append_uint(out, total_ops);
        out += ", \"self_ops\": ";
        json::append_uint(out, p.ops);
        out += ", \"flops\": ";
        json::append_uint(out, total_flops);
        out += ", \"self_flops\": ";
        json::append_uint(out, p.flops);
        out += ", \"comm_ms\": ";
        json::append_ms(out, p.comm_ns);
        out += ", \"comm_bytes\": ";
        json::append_uint(out, p.comm_bytes);
        out += ", \"collectives\": ";
        json::append_uint(out, p.collectives);
        if (info_.memory) append_memory(out, mem);
        out += ", \"top_ops\": [";
        std::vector<std::pair<uint32_t, OpStats>> ops(p.top_level_ops.begin(), p.top_level_ops.end());
        std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) {
          return a.second.ns != b.second.ns ? a.second.ns > b.second.ns : a.first < b.first;
        });
        for (size_t i = 0; i < ops.size() && i < kTopOps; ++i) {
          if (i > 0) out += ", ";
          out += "{\"name\": ";
          json::append_string(out, *ops[i].second.name);
          out += ", \"ms\": ";
          json::append_ms(out, ops[i].second.ns);
          out += ", \"count\": ";
          json::append_uint(out, ops[i].second.count);
          out += "}";
        }
        out += "]";
        if (!steps_.empty()) {
          auto med = step_medians.find(fqn);
          uint64_t sub = med != step_medians.end() ? med->second[static_cast<size_t>(ph)].first : 0;
          uint64_t self = med != step_medians.end() ? med->second[static_cast<size_t>(ph)].second : 0;
          out += ", \"step_median_ms\": ";
          json::append_ms(out, sub);
          out += ", \"step_self_median_ms\": ";
          json::append_ms(out, self);
        }
        out += "}";
      }
      if (!steps_.empty()) {
        out += ", \"step_self_ms\": [";
        auto samples = step_samples.find(fqn);
        for (size_t k = 0; k < steps_.kept_count(); ++k) {
          if (k > 0) out += ", ";
          json::append_ms(out, samples != step_samples.end() ? samples->second[k] : 0);
        }
        out += "]";
        auto spread = step_spreads.find(fqn);
        out += ", \"step_spread_pct\": ";
        if (spread == step_spreads.end()) {
          out += "null";
        } else {
          json::append_us(out, spread->second);  // thousandths, written with three decimals
        }
        // As the CLI's step_times.NOISY_PCT: over 10 % (and more than one step).
        bool noisy = spread != step_spreads.end() && steps_.kept_count() > 1 &&
                     spread->second > 10 * 1000;
        out += noisy ? ", \"noisy\": true" : ", \"noisy\": false";
      }
      out += "}";
    }
    out += "\n}}\n";
    file_.write(out);
    return file_.close(error);
  }

 private:
  TraceInfo info_;
  OutputFile file_;
  std::unordered_map<uint32_t, ModuleStats> modules_;
  std::unordered_map<uint32_t, PendingTime> pending_;  // by OS thread id
  StepTimes steps_;
  MemoryStats memory_;  // FQNTRACE_MEMORY
};

}  // namespace

std::unique_ptr<Exporter> make_summary_exporter() { return std::make_unique<SummaryExporter>(); }

}  // namespace fqntrace

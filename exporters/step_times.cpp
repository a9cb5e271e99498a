#include "exporters/step_times.h"

#include <algorithm>
#include <cmath>

#include "exporters/json_text.h"

namespace fqntrace {
namespace {

constexpr size_t kMaxPending = 1 << 20;  // top-level ops of one step; more: give up on per-step

uint64_t median(std::vector<uint64_t> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

template <typename T>
double median_of(std::vector<T> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 == 1 ? static_cast<double>(v[n / 2])
                    : (static_cast<double>(v[n / 2 - 1]) + static_cast<double>(v[n / 2])) / 2;
}

}  // namespace

void StepTimes::place(const Pending& p) {
  // The last range whose start is at or before the op's start.
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), p.start,
                             [](uint64_t t, const Range& r) { return t < r.start; });
  if (it == ranges_.begin()) return;  // before the first step
  --it;
  if (p.start >= it->end) return;  // between steps (outside a window)
  times_[static_cast<size_t>(it - ranges_.begin())][p.key] += p.ns;
}

void StepTimes::step_range(uint64_t step, uint64_t start_ns, uint64_t end_ns) {
  Range r{step, start_ns, end_ns};
  auto at = std::upper_bound(ranges_.begin(), ranges_.end(), start_ns,
                             [](uint64_t t, const Range& x) { return t < x.start; });
  size_t index = static_cast<size_t>(at - ranges_.begin());
  ranges_.insert(at, r);
  times_.emplace(times_.begin() + static_cast<std::ptrdiff_t>(index));
  uint64_t last_end = ranges_.back().end;
  std::vector<Pending> keep;
  for (const Pending& p : pending_) {
    if (p.start < last_end) {
      place(p);
    } else {
      keep.push_back(p);
    }
  }
  pending_.swap(keep);
}

void StepTimes::op(uint64_t start_ns, uint32_t fqn_id, int phase, uint64_t own_ns) {
  Pending p{start_ns, (static_cast<uint64_t>(fqn_id) << 2) | static_cast<uint64_t>(phase), own_ns};
  if (!ranges_.empty() && start_ns < ranges_.back().end) {
    place(p);
  } else if (pending_.size() < kMaxPending) {
    pending_.push_back(p);
  } else {
    overflowed_ = true;  // a program without steps: nothing to wait for
    pending_.clear();
  }
}

void StepTimes::finish(const std::unordered_map<uint32_t, const std::string*>& fqn_of, int phases,
                       std::string* out, Medians* medians, Samples* own_per_step,
                       Spreads* spread_milli_pct) {
  if (ranges_.empty()) return;
  std::vector<size_t> kept;
  for (size_t i = 0; i < ranges_.size(); ++i) {
    if (ranges_[i].step != 0) kept.push_back(i);
  }
  kept_count_ = kept.size();
  auto op_ns = [&](size_t i) {
    uint64_t sum = 0;
    for (const auto& [key, ns] : times_[i]) sum += ns;
    return sum;
  };
  *out += ", \"steps\": {\"count\": ";
  json::append_uint(*out, kept.size());
  *out += ", \"recorded\": ";
  json::append_uint(*out, ranges_.size());
  bool has_zero = kept.size() != ranges_.size();
  *out += has_zero ? ", \"excluded\": [0]" : ", \"excluded\": []";
  *out += ", \"kept\": [";
  for (size_t k = 0; k < kept.size(); ++k) {
    if (k > 0) *out += ", ";
    json::append_uint(*out, ranges_[kept[k]].step);
  }
  *out += "]";
  if (!kept.empty()) {
    std::vector<uint64_t> durations, ops, deviations;
    for (size_t i : kept) {
      durations.push_back(ranges_[i].end - ranges_[i].start);
      ops.push_back(op_ns(i));
    }
    uint64_t mid = median(durations);
    for (uint64_t d : durations) deviations.push_back(d > mid ? d - mid : mid - d);
    *out += ", \"median_ms\": ";
    json::append_ms(*out, mid);
    *out += ", \"min_ms\": ";
    json::append_ms(*out, *std::min_element(durations.begin(), durations.end()));
    *out += ", \"max_ms\": ";
    json::append_ms(*out, *std::max_element(durations.begin(), durations.end()));
    *out += ", \"mad_ms\": ";
    json::append_ms(*out, median(deviations));
    *out += ", \"median_op_ms\": ";
    json::append_ms(*out, median(ops));
  }
  if (overflowed_) *out += ", \"incomplete\": true";
  *out += ", \"per_step\": [";
  for (size_t i = 0; i < ranges_.size(); ++i) {
    if (i > 0) *out += ", ";
    *out += "{\"step\": ";
    json::append_uint(*out, ranges_[i].step);
    *out += ", \"ms\": ";
    json::append_ms(*out, ranges_[i].end - ranges_[i].start);
    *out += ", \"op_ms\": ";
    json::append_ms(*out, op_ns(i));
    *out += ranges_[i].step == 0 ? ", \"excluded\": true}" : ", \"excluded\": false}";
  }
  *out += "]}";

  // Per fqn and phase, per kept step: own time, and subtree time (added to every ancestor).
  std::map<std::string, std::vector<std::vector<uint64_t>>> own, subtree;  // [phase][kept step]
  auto slot = [&](auto& table, const std::string& fqn) -> std::vector<std::vector<uint64_t>>& {
    auto& v = table[fqn];
    if (v.empty()) v.assign(static_cast<size_t>(phases), std::vector<uint64_t>(kept.size(), 0));
    return v;
  };
  for (size_t k = 0; k < kept.size(); ++k) {
    for (const auto& [key, ns] : times_[kept[k]]) {
      auto found = fqn_of.find(static_cast<uint32_t>(key >> 2));
      if (found == fqn_of.end()) continue;
      const std::string& fqn = *found->second;
      size_t phase = static_cast<size_t>(key & 3);
      slot(own, fqn)[phase][k] += ns;
      for (size_t dot = fqn.find('.'); dot != std::string::npos; dot = fqn.find('.', dot + 1)) {
        slot(subtree, fqn.substr(0, dot))[phase][k] += ns;
      }
      slot(subtree, fqn)[phase][k] += ns;
    }
  }
  for (const auto& [fqn, per_phase] : subtree) {
    auto& m = (*medians)[fqn];
    m.assign(static_cast<size_t>(phases), {0, 0});
    auto mine = own.find(fqn);
    std::vector<uint64_t> all(kept.size(), 0);
    for (size_t ph = 0; ph < per_phase.size(); ++ph) {
      m[ph].first = median(per_phase[ph]);
      if (mine != own.end()) m[ph].second = median(mine->second[ph]);
      for (size_t k = 0; k < all.size(); ++k) all[k] += per_phase[ph][k];
    }
    // Median and MAD as the CLI's statistics.median: the mean of the two middle values.
    double mid = median_of(all);
    if (mid > 0) {
      std::vector<double> deviations;
      for (uint64_t v : all) deviations.push_back(std::fabs(static_cast<double>(v) - mid));
      double spread = 100.0 * 1.4826 * median_of(deviations) / mid;
      (*spread_milli_pct)[fqn] = static_cast<uint64_t>(std::llround(spread * 1000.0));
    }
  }
  for (const auto& [fqn, per_phase] : own) {
    std::vector<uint64_t>& all = (*own_per_step)[fqn];
    all.assign(kept.size(), 0);
    for (const auto& steps : per_phase) {
      for (size_t k = 0; k < steps.size(); ++k) all[k] += steps[k];
    }
  }
}

}  // namespace fqntrace

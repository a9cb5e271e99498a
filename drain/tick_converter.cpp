#include "drain/tick_converter.h"

#include <algorithm>

#include "buffer/ticks.h"

namespace fqntrace {
namespace {

constexpr uint64_t kFirstSpinNs = 1000000;        // 1 ms: first rate, good to ~20 ppm
constexpr uint64_t kFirstIntervalNs = 100000000;  // then re-measured after 0.1 s,
constexpr uint64_t kMaxIntervalNs = 10000000000;  // doubling up to every 10 s
constexpr double kMaxCorrection = 0.01;           // a piece's rate differs from the measured
                                                  // rate by at most 1 %

}  // namespace

TickConverter::Pair TickConverter::measure() {
  // The tick read just before and just after the clock read bracket it; the tightest of a few
  // tries gives the pair with the least uncertainty (a preemption spoils one try, not all).
  Pair best{};
  uint64_t best_width = UINT64_MAX;
  for (int i = 0; i < 5; ++i) {
    uint64_t a = now_ticks();
    uint64_t ns = monotonic_ns();
    uint64_t b = now_ticks();
    if (b - a < best_width) {
      best_width = b - a;
      best = {a + (b - a) / 2, ns};
    }
  }
  return best;
}

void TickConverter::start() {
  pieces_.clear();
  tsc_ = ticks_are_tsc();
  if (!tsc_) return;
  first_ = measure();
  Pair second = first_;
  while (second.ns - first_.ns < kFirstSpinNs || second.tick <= first_.tick) second = measure();
  double rate =
      static_cast<double>(second.ns - first_.ns) / static_cast<double>(second.tick - first_.tick);
  pieces_.push_back({first_.tick, first_.ns, rate});
  interval_ns_ = kFirstIntervalNs;
  next_due_ns_ = second.ns + interval_ns_;
}

void TickConverter::recalibrate_if_due() {
  if (!tsc_ || pieces_.empty()) return;
  uint64_t now = monotonic_ns();
  if (now < next_due_ns_) return;
  Pair p = measure();
  if (p.tick <= pieces_.back().tick || p.ns <= first_.ns) return;
  // The rate over everything measured so far, then a small tilt that brings the map back onto
  // the clock by the next measurement (the piece starts where the previous one ends).
  double rate = static_cast<double>(p.ns - first_.ns) / static_cast<double>(p.tick - first_.tick);
  interval_ns_ = std::min(interval_ns_ * 2, kMaxIntervalNs);
  uint64_t mapped = to_ns(p.tick);
  double error_ns = static_cast<double>(p.ns) - static_cast<double>(mapped);
  double tilt = error_ns / static_cast<double>(interval_ns_);
  tilt = std::max(-kMaxCorrection, std::min(kMaxCorrection, tilt));
  pieces_.push_back({p.tick, mapped, rate * (1.0 + tilt)});
  next_due_ns_ = p.ns + interval_ns_;
}

uint64_t TickConverter::convert(uint64_t ticks) const {
  if (pieces_.empty()) return ticks;
  // The piece that holds the tick: nearly always the last one (to_ns tried it), so that is tried
  // before a search (the drain converts two ticks per event; the search grows with the hours a
  // run lasts).
  // Next likeliest, the piece before it: a re-measurement starts a piece at "now", and the
  // events still in the rings then were recorded before it.
  const Piece* last = &pieces_.back();
  if (ticks < last->tick) {
    if (pieces_.size() >= 2 && ticks >= last[-1].tick) {
      --last;
    } else {
      auto it = std::upper_bound(pieces_.begin(), pieces_.end(), ticks,
                                 [](uint64_t t, const Piece& piece) { return t < piece.tick; });
      last = it == pieces_.begin() ? &pieces_.front() : &*(it - 1);
    }
  }
  const Piece& piece = *last;
  double delta = ticks >= piece.tick ? static_cast<double>(ticks - piece.tick)
                                     : -static_cast<double>(piece.tick - ticks);
  double ns = static_cast<double>(piece.ns) + delta * piece.ns_per_tick;
  return ns <= 0 ? 0 : static_cast<uint64_t>(ns + 0.5);
}

}  // namespace fqntrace

// Ticks → monotonic ns, on the drain (the caller serializes calls). A piecewise-linear map: it
// starts from a ~1 ms measurement of the tick rate and is re-measured against CLOCK_MONOTONIC at
// growing intervals (0.1 s … 10 s). Each new piece starts where the previous one ends, so the
// map stays continuous and increasing, and it begins at a tick later than any tick converted so
// far, so a tick converts to the same ns whenever it is converted (a node's flow source matches
// its forward op's start exactly). Identity when ticks are ns already.
#pragma once
#include <cstdint>
#include <vector>

namespace fqntrace {

class TickConverter {
 public:
  void start();               // session start: first measurement
  void recalibrate_if_due();  // drain, before converting a batch
  uint64_t to_ns(uint64_t ticks) const {
    if (!tsc_) return ticks;
    // Nearly every tick lies in the last piece: converted inline (the drain converts two per
    // event); older ticks take the search in convert().
    if (!pieces_.empty() && ticks >= pieces_.back().tick) {
      const Piece& piece = pieces_.back();
      double ns = static_cast<double>(piece.ns) +
                  static_cast<double>(ticks - piece.tick) * piece.ns_per_tick;
      return static_cast<uint64_t>(ns + 0.5);
    }
    return convert(ticks);
  }
  double ns_per_tick() const { return pieces_.empty() ? 1.0 : pieces_.back().ns_per_tick; }

 private:
  struct Pair {
    uint64_t tick;
    uint64_t ns;
  };
  struct Piece {
    uint64_t tick;  // first tick of the piece
    uint64_t ns;    // its ns
    double ns_per_tick;
  };
  static Pair measure();
  uint64_t convert(uint64_t ticks) const;
  bool tsc_ = false;
  Pair first_{};
  uint64_t next_due_ns_ = 0;
  uint64_t interval_ns_ = 0;
  std::vector<Piece> pieces_;  // grows by one per re-measurement: ~360 per hour at most
};

}  // namespace fqntrace

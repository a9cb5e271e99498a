#include "buffer/event_ring.h"

namespace fqntrace {

EventRing::EventRing(uint32_t capacity_log2)
    : capacity_(1ull << capacity_log2),
      mask_((1ull << capacity_log2) - 1),
      slots_(new Slot[1ull << capacity_log2]),
      look_at_(capacity_ / 2) {}

}  // namespace fqntrace

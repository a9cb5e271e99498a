// Input shapes (opt-in, FQNTRACE_SHAPES=1), callback side: the start callback encodes the op's
// inputs compactly (buffer/shapes_encoding.h) into one or more kShapes chunk events pushed to
// the thread's ring before the op's own event; the drain reassembles them
// (drain/shapes_assembler.h). Nothing is allocated or formatted here.
#pragma once
#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>

#include "buffer/event_ring.h"

namespace fqntrace::shapes {

// Encodes `inputs` of the op at `depth` into chunk events.
void record(c10::ArrayRef<const c10::IValue> inputs, uint8_t depth, EventRing& ring);

}  // namespace fqntrace::shapes

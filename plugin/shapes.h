// Input shapes (opt-in, FQNTRACE_SHAPES=1): Kineto's "Input Dims" and "Input type" args.
// The start callback encodes the inputs compactly (varints) into one or more fixed-size chunk
// events pushed to the thread's ring before the op's own event; the drain thread reassembles
// them by nesting depth and formats the JSON. Nothing is allocated or formatted in the callback.
#pragma once
#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>

#include <string>

#include "plugin/thread_buffer.h"

namespace fqntrace::shapes {

// Callback side: encodes `inputs` of the op at `depth` into chunk events.
void record(c10::ArrayRef<const c10::IValue> inputs, uint8_t depth, EventRing& ring);

// Drain side, one per thread buffer.
class Assembler {
 public:
  void add_chunk(const RawEvent& chunk);
  // The JSON arrays for the op at `depth` ("[[2, 4], []]", "[\"float\", \"Scalar\"]"); false if
  // none were recorded (or they were lost to a full buffer).
  bool take(uint8_t depth, std::string* dims_json, std::string* types_json);

 private:
  std::string pending_[256];
};

}  // namespace fqntrace::shapes

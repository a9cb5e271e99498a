// Input shapes (FQNTRACE_SHAPES=1), drain side: the chunks the start callback pushed before an op
// (plugin/shapes_encoder.h) are collected by nesting depth and, when the op's own event arrives,
// decoded into Kineto's "Input Dims" and "Input type" JSON arrays. One assembler per thread buffer.
#pragma once
#include <cstdint>
#include <string>

#include "buffer/event.h"

namespace fqntrace::shapes {

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

// The compact encoding of an op's input shapes (FQNTRACE_SHAPES=1) that the start callback
// writes (plugin/shapes_encoder.h) into kShapes chunks and the drain decodes
// (drain/shapes_assembler.h): per input a tag byte; a tensor adds its dtype byte, its rank byte
// and one varint per dimension.
#pragma once
#include <cstddef>
#include <cstdint>

namespace fqntrace::shapes {

enum Tag : uint8_t { kTensor = 1, kScalar, kNone, kTensorList, kIntList, kOther, kUndefined };

// Longer input lists are cut at a whole input: at most this many encoded bytes per op.
constexpr size_t kMaxEncoded = 240;

}  // namespace fqntrace::shapes

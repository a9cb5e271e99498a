#include "drain/shapes_assembler.h"

#include <c10/core/ScalarType.h>
#include <c10/core/ScalarTypeToTypeMeta.h>

#include "buffer/shapes_encoding.h"
#include "exporters/json_text.h"

namespace fqntrace::shapes {

void Assembler::add_chunk(const RawEvent& chunk) {
  std::string& p = pending_[chunk.depth];
  if (chunk.shapes.first) p.clear();
  size_t len = chunk.shapes.length;
  if (len > ShapesChunk::kCapacity) return;
  p.append(reinterpret_cast<const char*>(chunk.shapes.bytes), len);
}

bool Assembler::take(uint8_t depth, std::string* dims, std::string* types) {
  std::string& p = pending_[depth];
  if (p.empty()) return false;
  dims->assign("[");
  types->assign("[");
  size_t i = 0;
  bool first = true;
  auto read_varint = [&](uint64_t* out) {
    uint64_t v = 0;
    int shift = 0;
    while (i < p.size()) {
      uint8_t b = static_cast<uint8_t>(p[i++]);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) break;
      shift += 7;
    }
    *out = v;
  };
  while (i < p.size()) {
    uint8_t tag = static_cast<uint8_t>(p[i++]);
    if (!first) {
      *dims += ", ";
      *types += ", ";
    }
    first = false;
    std::string type;
    *dims += "[";
    if (tag == kTensor && i + 2 <= p.size()) {
      auto st = static_cast<c10::ScalarType>(static_cast<uint8_t>(p[i++]));
      size_t ndim = static_cast<uint8_t>(p[i++]);
      for (size_t d = 0; d < ndim; ++d) {
        uint64_t v;
        read_varint(&v);
        if (d) *dims += ", ";
        json::append_uint(*dims, v);
      }
      type = std::string(c10::scalarTypeToTypeMeta(st).name());
    } else if (tag == kScalar) {
      type = "Scalar";
    } else if (tag == kTensorList) {
      type = "TensorList";
    } else if (tag == kIntList) {
      type = "GenericList";
    }
    *dims += "]";
    json::append_string(*types, type);
  }
  *dims += "]";
  *types += "]";
  p.clear();
  return true;
}

}  // namespace fqntrace::shapes

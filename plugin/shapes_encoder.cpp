#include "plugin/shapes_encoder.h"

#include <cstring>

#include "buffer/shapes_encoding.h"

namespace fqntrace::shapes {
namespace {

struct Encoder {
  uint8_t bytes[kMaxEncoded];
  size_t n = 0;
  bool full = false;
  void put(uint8_t b) {
    if (n < kMaxEncoded) {
      bytes[n++] = b;
    } else {
      full = true;
    }
  }
  void varint(uint64_t v) {
    do {
      uint8_t b = v & 0x7F;
      v >>= 7;
      put(static_cast<uint8_t>(b | (v ? 0x80 : 0)));
    } while (v);
  }
};

}  // namespace

void record(c10::ArrayRef<const c10::IValue> inputs, uint8_t depth, EventRing& ring) {
  Encoder enc;
  for (const c10::IValue& v : inputs) {
    size_t mark = enc.n;
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (!t.defined()) {
        enc.put(kUndefined);
      } else {
        enc.put(kTensor);
        enc.put(static_cast<uint8_t>(t.scalar_type()));
        enc.put(static_cast<uint8_t>(t.dim()));
        for (int64_t d : t.sizes()) enc.varint(static_cast<uint64_t>(d < 0 ? 0 : d));
      }
    } else if (v.isScalar()) {
      enc.put(kScalar);
    } else if (v.isNone()) {
      enc.put(kNone);
    } else if (v.isTensorList()) {
      enc.put(kTensorList);
    } else if (v.isIntList()) {
      enc.put(kIntList);
    } else {
      enc.put(kOther);
    }
    if (enc.full) {  // drop the input that did not fit whole
      enc.n = mark;
      break;
    }
  }
  // One chunk at least: its `first` clears what an earlier op at this depth left behind.
  constexpr size_t kChunk = ShapesChunk::kCapacity;
  for (size_t off = 0; off == 0 || off < enc.n; off += kChunk) {
    RawEvent chunk;
    size_t len = enc.n - off < kChunk ? enc.n - off : kChunk;
    std::memcpy(chunk.shapes.bytes, enc.bytes + off, len);
    chunk.shapes.length = static_cast<uint8_t>(len);
    chunk.shapes.first = off == 0;
    chunk.kind = EventKind::kShapes;
    chunk.phase = Phase::kForward;
    chunk.depth = depth;
    chunk.flags = 0;
    ring.push(chunk);
    if (enc.n == 0) break;
  }
}

}  // namespace fqntrace::shapes

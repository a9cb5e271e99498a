#include "plugin/shapes.h"

#include <c10/core/ScalarType.h>

#include <cstring>

#include "exporters/json_text.h"

namespace fqntrace::shapes {
namespace {

constexpr size_t kPayload = 60;      // bytes of a RawEvent before kind/phase/depth/flags
constexpr size_t kMaxEncoded = 240;  // at most four chunks per op; longer input lists are cut
constexpr uint8_t kFirstChunk = 1;

enum Tag : uint8_t { kTensor = 1, kScalar, kNone, kTensorList, kIntList, kOther, kUndefined };

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
  for (size_t off = 0; off == 0 || off < enc.n; off += kPayload) {
    RawEvent chunk;
    size_t len = enc.n - off < kPayload ? enc.n - off : kPayload;
    std::memcpy(&chunk, enc.bytes + off, len);
    chunk.kind = EventKind::kShapes;
    chunk.phase = static_cast<Phase>(len);  // the payload length travels in the phase byte
    chunk.depth = depth;
    chunk.flags = off == 0 ? kFirstChunk : 0;
    ring.push(chunk);
    if (enc.n == 0) break;
  }
}

void Assembler::add_chunk(const RawEvent& chunk) {
  std::string& p = pending_[chunk.depth];
  if (chunk.flags & kFirstChunk) p.clear();
  size_t len = static_cast<size_t>(chunk.phase);
  if (len > kPayload) return;
  p.append(reinterpret_cast<const char*>(&chunk), len);
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

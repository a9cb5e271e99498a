#include "plugin/flops.h"

#include <initializer_list>
#include <utility>

namespace fqntrace {
namespace {

// A fixed-capacity shape: this runs inside the observer callback, where nothing may allocate.
class Shape {
 public:
  static constexpr size_t kMaxDims = 8;
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) {
    for (int64_t d : dims) push_back(d);
  }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t operator[](size_t i) const { return dims_[i]; }
  int64_t& operator[](size_t i) { return dims_[i]; }
  void clear() { n_ = 0; }
  bool push_back(int64_t d) {
    if (n_ == kMaxDims) return false;
    dims_[n_++] = d;
    return true;
  }

 private:
  int64_t dims_[kMaxDims] = {};
  size_t n_ = 0;
};

bool tensor_shape(const c10::IValue& v, Shape* out) {
  if (!v.isTensor()) return false;
  const at::Tensor& t = v.toTensor();
  if (!t.defined()) return false;
  out->clear();
  for (int64_t d : t.sizes()) {
    if (!out->push_back(d)) return false;
  }
  return true;
}

bool int_list(const c10::IValue& v, Shape* out) {
  out->clear();
  if (v.isIntList()) {
    for (int64_t x : v.toIntList()) {
      if (!out->push_back(x)) return false;
    }
    return true;
  }
  if (v.isList()) {
    for (const c10::IValue& x : v.toListRef()) {
      bool ok = x.isInt()      ? out->push_back(x.toInt())
                : x.isSymInt() ? out->push_back(x.toSymInt().guard_int(__FILE__, __LINE__))
                               : false;
      if (!ok) return false;
    }
    return true;
  }
  return false;
}

uint64_t product(const Shape& s, size_t from) {
  uint64_t p = 1;
  for (size_t i = from; i < s.size(); ++i) p *= static_cast<uint64_t>(s[i]);
  return p;
}

uint64_t bmm_flops(int64_t b, int64_t m, int64_t k, int64_t n) {
  return 2ull * static_cast<uint64_t>(b) * m * k * n;
}

// FlopCounterMode's conv_flop_count: only multiplications of the "convolution shape".
uint64_t conv_flop_count(const Shape& x, const Shape& w, const Shape& out, bool transposed) {
  if (x.size() < 2 || w.size() < 2 || out.size() < 2) return 0;
  const Shape& conv_shape = transposed ? x : out;
  return product(conv_shape, 2) * product(w, 2) * static_cast<uint64_t>(x[0]) *
         static_cast<uint64_t>(w[0]) * static_cast<uint64_t>(w[1]) * 2ull;
}

Shape swap01(const Shape& s) {
  Shape t = s;
  if (t.size() >= 2) std::swap(t[0], t[1]);
  return t;
}

uint64_t conv_forward(c10::ArrayRef<const c10::IValue> in) {
  Shape x, w, stride, padding, dilation, output_padding;
  if (in.size() < 8 || !tensor_shape(in[0], &x) || !tensor_shape(in[1], &w) ||
      !int_list(in[3], &stride) || !int_list(in[4], &padding) || !int_list(in[5], &dilation) ||
      !in[6].isBool()) {
    return 0;
  }
  bool transposed = in[6].toBool();
  if (transposed) return conv_flop_count(x, w, x, true);  // uses only the input's spatial shape
  // The output's spatial shape, as the convolution computes it.
  Shape out = {x.size() > 0 ? x[0] : 0, w.size() > 0 ? w[0] : 0};
  for (size_t d = 2; d < x.size() && d < w.size(); ++d) {
    size_t i = d - 2;
    int64_t s = i < stride.size() ? stride[i] : stride.empty() ? 1 : stride[0];
    int64_t p = i < padding.size() ? padding[i] : padding.empty() ? 0 : padding[0];
    int64_t dl = i < dilation.size() ? dilation[i] : dilation.empty() ? 1 : dilation[0];
    out.push_back((x[d] + 2 * p - dl * (w[d] - 1) - 1) / s + 1);
  }
  return conv_flop_count(x, w, out, false);
}

uint64_t conv_backward(c10::ArrayRef<const c10::IValue> in) {
  Shape grad_out, x, w;
  if (in.size() < 11 || !tensor_shape(in[0], &grad_out) || !tensor_shape(in[1], &x) ||
      !tensor_shape(in[2], &w) || !in[7].isBool() || !in[10].isBoolList()) {
    return 0;
  }
  bool transposed = in[7].toBool();
  auto mask = in[10].toBoolList();
  uint64_t flops = 0;
  // grad_input has x's shape, grad_weight has w's shape.
  if (mask.size() > 0 && mask.get(0)) flops += conv_flop_count(grad_out, w, x, !transposed);
  if (mask.size() > 1 && mask.get(1)) {
    flops += transposed ? conv_flop_count(swap01(grad_out), swap01(x), swap01(w), false)
                        : conv_flop_count(swap01(x), swap01(grad_out), swap01(w), false);
  }
  return flops;
}

uint64_t sdpa(c10::ArrayRef<const c10::IValue> in, bool backward) {
  Shape q, k, v;
  size_t first = backward ? 1 : 0;  // backward: (grad_out, q, k, v, ...)
  if (in.size() < first + 3 || !tensor_shape(in[first], &q) || !tensor_shape(in[first + 1], &k) ||
      !tensor_shape(in[first + 2], &v) || q.size() != 4 || k.size() != 4 || v.size() != 4) {
    return 0;
  }
  int64_t bh = q[0] * q[1], s_q = q[2], d_q = q[3], s_k = k[2], d_v = v[3];
  if (!backward) return bmm_flops(bh, s_q, d_q, s_k) + bmm_flops(bh, s_q, s_k, d_v);
  return bmm_flops(bh, s_q, d_q, s_k) + bmm_flops(bh, s_q, d_v, s_k) +
         bmm_flops(bh, s_k, s_q, d_v) + bmm_flops(bh, s_q, s_k, d_q) + bmm_flops(bh, d_q, s_q, s_k);
}

}  // namespace

FlopKind flop_kind_of(std::string_view name) {
  if (name.substr(0, 6) != "aten::") return FlopKind::kNone;
  name.remove_prefix(6);
  if (name == "mm") return FlopKind::kMm;
  if (name == "addmm") return FlopKind::kAddmm;
  if (name == "bmm") return FlopKind::kBmm;
  if (name == "baddbmm") return FlopKind::kBaddbmm;
  if (name == "convolution" || name == "_convolution" || name == "cudnn_convolution" ||
      name == "convolution_overrideable" || name == "_slow_conv2d_forward") {
    return FlopKind::kConv;
  }
  if (name == "convolution_backward") return FlopKind::kConvBackward;
  // The *_for_cpu kernels are what sdpa runs on the CPU; FlopCounterMode does not list them.
  if (name == "_scaled_dot_product_efficient_attention" ||
      name == "_scaled_dot_product_flash_attention" ||
      name == "_scaled_dot_product_cudnn_attention" ||
      name == "_scaled_dot_product_flash_attention_for_cpu") {
    return FlopKind::kSdpa;
  }
  if (name == "_scaled_dot_product_efficient_attention_backward" ||
      name == "_scaled_dot_product_flash_attention_backward" ||
      name == "_scaled_dot_product_cudnn_attention_backward" ||
      name == "_scaled_dot_product_flash_attention_for_cpu_backward") {
    return FlopKind::kSdpaBackward;
  }
  return FlopKind::kNone;
}

uint64_t count_flops(FlopKind kind, c10::ArrayRef<const c10::IValue> in) {
  try {
    Shape a, b;
    switch (kind) {
      case FlopKind::kNone:
        return 0;
      case FlopKind::kMm:
      case FlopKind::kAddmm: {
        size_t i = kind == FlopKind::kAddmm ? 1 : 0;
        if (in.size() < i + 2 || !tensor_shape(in[i], &a) || !tensor_shape(in[i + 1], &b) ||
            a.size() != 2 || b.size() != 2) {
          return 0;
        }
        return bmm_flops(1, a[0], a[1], b[1]);
      }
      case FlopKind::kBmm:
      case FlopKind::kBaddbmm: {
        size_t i = kind == FlopKind::kBaddbmm ? 1 : 0;
        if (in.size() < i + 2 || !tensor_shape(in[i], &a) || !tensor_shape(in[i + 1], &b) ||
            a.size() != 3 || b.size() != 3) {
          return 0;
        }
        return bmm_flops(a[0], a[1], a[2], b[2]);
      }
      case FlopKind::kConv:
        return conv_forward(in);
      case FlopKind::kConvBackward:
        return conv_backward(in);
      case FlopKind::kSdpa:
        return sdpa(in, false);
      case FlopKind::kSdpaBackward:
        return sdpa(in, true);
    }
  } catch (...) {
  }
  return 0;
}

}  // namespace fqntrace

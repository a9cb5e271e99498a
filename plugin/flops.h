// FLOPs of matmul-family ops, convolutions and scaled-dot-product attention, forward and
// backward, computed from input sizes with the same formulas as torch.utils.flop_counter
// (FlopCounterMode), so per-module counts agree with it.
#pragma once
#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <string_view>

namespace fqntrace {

enum class FlopKind : uint8_t {
  kNone = 0,
  kMm,            // mm(a, b)
  kAddmm,         // addmm(self, a, b)
  kBmm,           // bmm(a, b)
  kBaddbmm,       // baddbmm(self, a, b)
  kConv,          // convolution(x, w, bias, stride, padding, dilation, transposed, ...)
  kConvBackward,  // convolution_backward(grad_out, x, w, bias_sizes, stride, padding, dilation,
                  // transposed, output_padding, groups, output_mask)
  kSdpa,          // _scaled_dot_product_*_attention(q, k, v, ...)
  kSdpaBackward,  // _scaled_dot_product_*_attention_backward(grad_out, q, k, v, ...)
};

// Which formula applies to an operator name ("aten::mm" …); kNone for every other op.
FlopKind flop_kind_of(std::string_view op_name);

// FLOPs for one call; 0 when the inputs are not what the formula expects.
uint64_t count_flops(FlopKind kind, c10::ArrayRef<const c10::IValue> inputs);

}  // namespace fqntrace

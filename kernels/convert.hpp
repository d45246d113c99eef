// Conversion between the floating-point dtypes (fp64, fp32, bf16, fp16): exact when widening,
// round to nearest-even when narrowing (as torch's .to(dtype)). Mixed precision uses it to make
// the half-precision model weights from the fp32 main parameters, and to stage 16-bit tensors.
#pragma once
#include <cstdint>

#include "tensor/tensor.hpp"

namespace mactor::kernels {

/// dst = src converted to dst's dtype; same numel and device. Throws tensor::tensor_error
/// naming both dtypes for a pair without a conversion (the fp8 types: see their recipes).
void convert(tensor::tensor_view dst, tensor::const_tensor_view src);

/// x = x rounded to `type` and widened back: an fp32 tensor holding exactly the values a tensor
/// of `type` would (what a 16-bit GEMM output holds), without storing it in 16 bits. x is fp32
/// for bf16 and fp16; for fp32 and fp64 there is nothing to do.
void round_through(tensor::tensor_view x, tensor::dtype type);

/// The element-level conversions behind convert() (n elements).
void widen_to_float(float* dst, const tensor::bfloat16* src, std::int64_t n);
void widen_to_float(float* dst, const tensor::float16* src, std::int64_t n);
void round_from_float(tensor::bfloat16* dst, const float* src, std::int64_t n);
void round_from_float(tensor::float16* dst, const float* src, std::int64_t n);

}  // namespace mactor::kernels

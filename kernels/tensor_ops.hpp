// Element-wise operations on whole tensors, dispatched on dtype and device (kernels/dispatch.hpp).
#pragma once

#include "tensor/tensor.hpp"

namespace mactor::kernels {

/// x *= factor.
void scale(tensor::tensor_view x, double factor);
/// dst += src (same dtype, device and numel; a 16-bit sum is rounded once).
void add(tensor::tensor_view dst, tensor::const_tensor_view src);
/// dst = src (same dtype, device and numel; kernels/convert.hpp converts between dtypes).
void copy(tensor::tensor_view dst, tensor::const_tensor_view src);
/// x = 0.
void fill_zero(tensor::tensor_view x);

}  // namespace mactor::kernels

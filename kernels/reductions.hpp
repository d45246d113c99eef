// Whole-tensor reductions the optimizer's statistics need (the gradient norm, the zeros in the
// gradients, the parameters' norm), each returned to the host as a double. The CPU sums its
// elements in order; a device sums in its own order, so its results may differ from the CPU's
// in the last bits of the double.
#pragma once

#include "tensor/tensor.hpp"

namespace mactor::kernels {

/// The sum of x[i]^2 over x's elements, each widened to double first (fp32 or fp64 views).
double sum_of_squares(tensor::const_tensor_view x);
/// How many of x's elements are zero (fp32 or fp64 views).
double count_zeros(tensor::const_tensor_view x);

}  // namespace mactor::kernels

// A linear layer's GEMMs (y = x W^T, dx = dy W, dW += dy^T x) through the model's fp8 GEMM when
// it has one, else the kernels' GEMMs with the weight gradient deferred into a zero-bubble
// schedule's weight pass when one is collecting.
#pragma once
#include "model/fp8_linear.hpp"
#include "model/parameter.hpp"
#include "tensor/tensor.hpp"

namespace mactor::model {

/// y[rows, out] = x[rows, in] W[out, in]^T, through `fp8` when it is not null.
void linear_gemm_forward(fp8_linear* fp8, tensor::const_tensor_view x, tensor::const_tensor_view w,
                         tensor::tensor_view y, int rows, int in, int out);
/// dx = dy W (overwritten) and grad(weight) += dy^T x; an fp8 GEMM makes both at once, otherwise
/// the weight gradient runs now or in the store's deferred weight pass.
void linear_gemm_backward(parameter_store& store, fp8_linear* fp8, int weight, tensor::const_tensor_view dy,
                          tensor::const_tensor_view x, tensor::tensor_view dx, int rows, int in, int out);

}  // namespace mactor::model

// Gated linear units as Megatron-Core's MLP computes them unfused (its `glu` in mlp.py): the fc1
// output row is [gate | linear] (torch.chunk(x, 2, -1)); with a clamp value c the gate is clamped
// from above to c and the linear half to [-c, c] (--activation-func-clamp-value); then
// y = act(gate) * (linear + offset) (--glu-linear-offset). act is SiLU (--swiglu) or quick GeLU,
// x * sigmoid(1.702 x) (--quick-geglu). Clamps pass gradients as torch.clamp does: where the input
// lies inside the bounds, ends included.
#pragma once
#include <optional>

#include "tensor/tensor.hpp"

namespace mactor::kernels {

enum class glu_activation { silu, quick_gelu };

struct glu_options {
  glu_activation activation = glu_activation::silu;
  std::optional<double> clamp;  // none: no clamping
  double linear_offset = 0.0;
};

/// y[n, f] = act(min(gate, c)) * (clamp(linear, -c, c) + offset), gate = x[n, 0:f], linear = x[n, f:2f].
template <typename T>
void glu_forward(T* y, const T* x, int n, int f, const glu_options& options);

/// dx[n, 2f] from dy[n, f] and the forward input x[n, 2f].
template <typename T>
void glu_backward(T* dx, const T* dy, const T* x, int n, int f, const glu_options& options);

// Tensor entry points: dispatch on dtype and device (every tensor the same), sizes checked.
void glu_forward(tensor::tensor_view y, tensor::const_tensor_view x, int n, int f,
                 const glu_options& options);
void glu_backward(tensor::tensor_view dx, tensor::const_tensor_view dy,
                  tensor::const_tensor_view x, int n, int f, const glu_options& options);

}  // namespace mactor::kernels

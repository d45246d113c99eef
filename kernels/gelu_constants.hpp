// The constants of GeLU's erf and tanh forms, shared by the CPU and CUDA kernels so that both
// round the same values.
#pragma once

namespace mactor::kernels::gelu_constants {

inline constexpr float inv_sqrt2 = 0.70710678118654752440f;      // 1 / sqrt(2)
inline constexpr float inv_sqrt_2pi = 0.39894228040143267794f;   // 1 / sqrt(2 pi)
inline constexpr float sqrt_2_over_pi = 0.79788456080286535588f;  // sqrt(2 / pi)
inline constexpr float tanh_coeff = 0.044715f;

}  // namespace mactor::kernels::gelu_constants

// SwiGLU and GeLU, forward and backward: one thread per output element (grid-stride loops).
#include "kernels/cuda/activations.hpp"

#include "kernels/gelu_constants.hpp"
#include "kernels/cuda/grid_stride.cuh"
#include "kernels/cuda/sigmoid.cuh"

namespace mactor::kernels::cuda {

namespace {

using namespace gelu_constants;

using detail::sigmoid;

__global__ void swiglu_forward_kernel(float* y, const float* x, long long count, int f) {
  for (long long e = detail::first_element(); e < count; e += detail::grid_stride()) {
    const long long row = e / f, j = e % f;
    const float gate = x[row * 2 * f + j], up = x[row * 2 * f + f + j];
    y[e] = gate * sigmoid(gate) * up;
  }
}

__global__ void swiglu_backward_kernel(float* dx, const float* dy, const float* x, long long count, int f) {
  for (long long e = detail::first_element(); e < count; e += detail::grid_stride()) {
    const long long row = e / f, j = e % f;
    const float gate = x[row * 2 * f + j], up = x[row * 2 * f + f + j];
    const float s = sigmoid(gate);
    dx[row * 2 * f + j] = dy[e] * up * s * (1.f + gate * (1.f - s));
    dx[row * 2 * f + f + j] = dy[e] * gate * s;
  }
}

__device__ float gelu_value(float v, bool tanh_form) {
  if (tanh_form) return 0.5f * v * (1.f + tanhf(sqrt_2_over_pi * v * (1.f + tanh_coeff * v * v)));
  return 0.5f * v * (1.f + erff(v * inv_sqrt2));
}

__device__ float gelu_slope(float v, bool tanh_form) {
  if (tanh_form) {
    const float t = tanhf(sqrt_2_over_pi * v * (1.f + tanh_coeff * v * v));
    const float du = sqrt_2_over_pi * (1.f + 3.f * tanh_coeff * v * v);
    return 0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) * du;
  }
  return 0.5f * (1.f + erff(v * inv_sqrt2)) + v * inv_sqrt_2pi * expf(-0.5f * v * v);
}

__global__ void gelu_forward_kernel(float* y, const float* x, long long n, bool tanh_form) {
  for (long long e = detail::first_element(); e < n; e += detail::grid_stride())
    y[e] = gelu_value(x[e], tanh_form);
}

__global__ void gelu_backward_kernel(float* dx, const float* dy, const float* x, long long n, bool tanh_form) {
  for (long long e = detail::first_element(); e < n; e += detail::grid_stride())
    dx[e] = dy[e] * gelu_slope(x[e], tanh_form);
}

}  // namespace

void swiglu_forward(float* y, const float* x, int n, int f, stream_handle s) {
  const long long count = (long long)n * f;
  if (count == 0) return;
  swiglu_forward_kernel<<<detail::grid_blocks(count), detail::grid_threads, 0, s>>>(y, x, count, f);
  detail::check_launch("swiglu_forward");
}

void swiglu_backward(float* dx, const float* dy, const float* x, int n, int f, stream_handle s) {
  const long long count = (long long)n * f;
  if (count == 0) return;
  swiglu_backward_kernel<<<detail::grid_blocks(count), detail::grid_threads, 0, s>>>(dx, dy, x, count, f);
  detail::check_launch("swiglu_backward");
}

void gelu_forward(float* y, const float* x, std::int64_t n, bool tanh_approximation, stream_handle s) {
  if (n == 0) return;
  gelu_forward_kernel<<<detail::grid_blocks(n), detail::grid_threads, 0, s>>>(y, x, n, tanh_approximation);
  detail::check_launch("gelu_forward");
}

void gelu_backward(float* dx, const float* dy, const float* x, std::int64_t n, bool tanh_approximation,
                   stream_handle s) {
  if (n == 0) return;
  gelu_backward_kernel<<<detail::grid_blocks(n), detail::grid_threads, 0, s>>>(dx, dy, x, n, tanh_approximation);
  detail::check_launch("gelu_backward");
}

}  // namespace mactor::kernels::cuda

// How a kernel picks its implementation: by the tensors' device, then their dtype. The CPU
// backend is the default and the reference; a dtype or device without an implementation is a
// clear error naming the kernel, never a silent fallback.
#pragma once

#include <string>
#include <utility>

#include "tensor/tensor.hpp"

namespace mactor::kernels {

/// Thrown for a kernel asked to run on a dtype or device it has no implementation for.
class unsupported_kernel : public tensor::tensor_error {
 public:
  unsupported_kernel(const std::string& kernel, tensor::dtype t, tensor::device d)
      : tensor::tensor_error("kernel " + kernel + " has no implementation for " + std::string(tensor::short_name(t)) +
                             " on " + tensor::to_string(d)) {}
};

/// Calls f(T{}) with T the C++ element type of `t` for a CPU kernel (float or double today;
/// bf16/fp16 join here with mixed precision, CUDA devices with the GPU backend).
template <class F>
decltype(auto) dispatch_floating(const char* kernel, tensor::dtype t, tensor::device d, F&& f) {
  if (d.type == tensor::device_type::cpu) {
    switch (t) {
      case tensor::dtype::float32: return std::forward<F>(f)(float{});
      case tensor::dtype::float64: return std::forward<F>(f)(double{});
      default: break;
    }
  }
  throw unsupported_kernel(kernel, t, d);
}

/// Calls f(C{}) with C the type a CPU kernel computes in for dtype t: double for fp64, float for
/// fp32, bf16 and fp16. A kernel reads and writes 16-bit tensors through detail::fp32_stage
/// (kernels/cpu/typed.hpp): widened exactly, computed on in fp32, rounded back to nearest-even,
/// as a GPU kernel loads, computes and stores.
template <class F>
decltype(auto) dispatch_compute(const char* kernel, tensor::dtype t, tensor::device d, F&& f) {
  if (d.type == tensor::device_type::cpu) {
    switch (t) {
      case tensor::dtype::float32:
      case tensor::dtype::bfloat16:
      case tensor::dtype::float16: return std::forward<F>(f)(float{});
      case tensor::dtype::float64: return std::forward<F>(f)(double{});
      default: break;
    }
  }
  throw unsupported_kernel(kernel, t, d);
}

/// The dtype a CPU kernel computes in for tensors of t (fp64 for fp64, fp32 otherwise): layers
/// keep statistics (norms' mean and rstd, the loss's row maxima and sums) in it.
constexpr tensor::dtype compute_dtype(tensor::dtype t) {
  return t == tensor::dtype::float64 ? tensor::dtype::float64 : tensor::dtype::float32;
}

/// Checks that the non-empty views can meet in one kernel: on one device, and either all fp64
/// or all of fp32, bf16 and fp16 (computed in fp32); throws tensor::tensor_error naming the
/// kernel otherwise.
void check_compatible(const char* kernel, std::initializer_list<tensor::const_tensor_view> views);

/// Checks that every non-empty view shares the first one's dtype and device (kernels do not mix them unless
/// their signature says so); throws tensor::tensor_error naming the kernel otherwise.
void check_same_type(const char* kernel, std::initializer_list<tensor::const_tensor_view> views);

}  // namespace mactor::kernels

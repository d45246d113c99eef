// fp32 views for the CUDA kernels, as kernels/cpu/typed.hpp's fp32_stage gives the CPU kernels:
// an fp32 view as it is; a bf16 or fp16 one widened into scratch device memory, and an output
// rounded back to its dtype when the stage ends (nearest-even, once). Any other dtype is an
// unsupported_kernel error naming the kernel. Work goes on the thread's current stream.
#pragma once

#include <vector>

#include "kernels/cuda/launch.hpp"
#include "tensor/cuda/device_allocator.hpp"
#include "tensor/tensor.hpp"

namespace mactor::kernels::cuda {

/// dst (fp32, src.numel() elements) <- the bf16 or fp16 view src, widened exactly; any other dtype
/// is an unsupported_kernel error naming `kernel`. On the current stream.
void widen_into(const char* kernel, float* dst, const tensor::const_tensor_view& src);
/// The bf16 or fp16 view dst <- dst.numel() fp32 values from `from`, rounded to nearest-even;
/// likewise.
void round_into(const char* kernel, const tensor::tensor_view& dst, const float* from);

class device_stage {
 public:
  explicit device_stage(const char* kernel);
  device_stage(const device_stage&) = delete;
  device_stage& operator=(const device_stage&) = delete;
  /// Rounds the staged outputs back, unless an exception is on its way out.
  ~device_stage() noexcept(false);

  /// An output (read and written); nullptr for an empty view.
  float* f32(const tensor::tensor_view& v);
  /// An input; nullptr for an empty view.
  const float* f32(const tensor::const_tensor_view& v);

 private:
  float* widen(const tensor::const_tensor_view& v);

  struct staged {
    tensor::tensor_view target;
    mactor::cuda::device_buffer values;
  };
  const char* kernel_;
  int exceptions_at_start_;
  std::vector<staged> outputs_;
  std::vector<mactor::cuda::device_buffer> inputs_;
};

}  // namespace mactor::kernels::cuda

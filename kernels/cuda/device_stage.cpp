// Staging 16-bit device views through fp32 scratch.
#include "kernels/cuda/device_stage.hpp"

#include <exception>

#include "kernels/cuda/convert.hpp"
#include "kernels/dispatch.hpp"
#include "tensor/cuda/current_stream.hpp"

namespace mactor::kernels::cuda {

device_stage::device_stage(const char* kernel) : kernel_(kernel), exceptions_at_start_(std::uncaught_exceptions()) {}

device_stage::~device_stage() noexcept(false) {
  if (std::uncaught_exceptions() > exceptions_at_start_) return;
  const auto s = mactor::cuda::current_stream();
  for (auto& o : outputs_) {
    const auto n = o.target.numel();
    if (o.target.type == tensor::dtype::bfloat16)
      round_from_float(static_cast<tensor::bfloat16*>(o.target.data), o.values.as<float>(), n, s);
    else
      round_from_float(static_cast<tensor::float16*>(o.target.data), o.values.as<float>(), n, s);
  }
}

float* device_stage::widen(const tensor::const_tensor_view& v) {
  if (!tensor::is_half_precision(v.type)) throw unsupported_kernel(kernel_, v.type, v.where);
  mactor::cuda::device_buffer values({v.numel()}, tensor::dtype::float32, v.where.index);
  const auto s = mactor::cuda::current_stream();
  if (v.type == tensor::dtype::bfloat16)
    widen_to_float(values.as<float>(), static_cast<const tensor::bfloat16*>(v.data), v.numel(), s);
  else
    widen_to_float(values.as<float>(), static_cast<const tensor::float16*>(v.data), v.numel(), s);
  float* data = values.as<float>();
  inputs_.push_back(std::move(values));
  return data;
}

float* device_stage::f32(const tensor::tensor_view& v) {
  if (!v.data) return nullptr;
  if (v.type == tensor::dtype::float32) return static_cast<float*>(v.data);
  float* data = widen(v);
  // The scratch moves from the inputs to the outputs: rounded back at the end.
  outputs_.push_back({v, std::move(inputs_.back())});
  inputs_.pop_back();
  return data;
}

const float* device_stage::f32(const tensor::const_tensor_view& v) {
  if (!v.data) return nullptr;
  if (v.type == tensor::dtype::float32) return static_cast<const float*>(v.data);
  return widen(v);
}

}  // namespace mactor::kernels::cuda

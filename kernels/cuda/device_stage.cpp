// Staging 16-bit device views through fp32 scratch.
#include "kernels/cuda/device_stage.hpp"

#include <exception>

#include "kernels/cuda/convert.hpp"
#include "kernels/dispatch.hpp"
#include "tensor/cuda/current_stream.hpp"

namespace mactor::kernels::cuda {

void widen_into(const char* kernel, float* dst, const tensor::const_tensor_view& src) {
  const auto s = mactor::cuda::current_stream();
  if (src.type == tensor::dtype::bfloat16)
    return widen_to_float(dst, static_cast<const tensor::bfloat16*>(src.data), src.numel(), s);
  if (src.type == tensor::dtype::float16)
    return widen_to_float(dst, static_cast<const tensor::float16*>(src.data), src.numel(), s);
  throw unsupported_kernel(kernel, src.type, src.where);
}

void round_into(const char* kernel, const tensor::tensor_view& dst, const float* from) {
  const auto s = mactor::cuda::current_stream();
  if (dst.type == tensor::dtype::bfloat16)
    return round_from_float(static_cast<tensor::bfloat16*>(dst.data), from, dst.numel(), s);
  if (dst.type == tensor::dtype::float16)
    return round_from_float(static_cast<tensor::float16*>(dst.data), from, dst.numel(), s);
  throw unsupported_kernel(kernel, dst.type, dst.where);
}

device_stage::device_stage(const char* kernel) : kernel_(kernel), exceptions_at_start_(std::uncaught_exceptions()) {}

device_stage::~device_stage() noexcept(false) {
  if (std::uncaught_exceptions() > exceptions_at_start_) return;
  for (auto& o : outputs_) round_into(kernel_, o.target, o.values.as<float>());
}

float* device_stage::widen(const tensor::const_tensor_view& v) {
  if (!tensor::is_half_precision(v.type)) throw unsupported_kernel(kernel_, v.type, v.where);
  mactor::cuda::device_buffer values({v.numel()}, tensor::dtype::float32, v.where.index);
  widen_into(kernel_, values.as<float>(), v);
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

// Conversions between fp32 and the 16-bit types on a CUDA device: kernels/convert.hpp's element
// conversions (exact widening; narrowing rounded to nearest-even by CUDA's own __float2bfloat16_rn
// and __float2half_rn, the bits the host's conversion gives for every non-NaN value), pointers into
// device memory, queued on stream s.
#pragma once
#include <cstdint>

#include "kernels/cuda/launch.hpp"
#include "tensor/half_float.hpp"

namespace mactor::kernels::cuda {

void widen_to_float(float* dst, const tensor::bfloat16* src, std::int64_t n, stream_handle s = nullptr);
void widen_to_float(float* dst, const tensor::float16* src, std::int64_t n, stream_handle s = nullptr);
void round_from_float(tensor::bfloat16* dst, const float* src, std::int64_t n, stream_handle s = nullptr);
void round_from_float(tensor::float16* dst, const float* src, std::int64_t n, stream_handle s = nullptr);

}  // namespace mactor::kernels::cuda

// The MoE token dispatch's row operations on a CUDA device: kernels/moe_permute.hpp's contracts,
// fp32, tensors and row indices in device memory, queued on stream s. The row indices are the
// caller's to check (the tensor entry points check them on the host before they are uploaded).
#pragma once
#include <cstdint>

#include "kernels/cuda/launch.hpp"

namespace mactor::kernels::cuda {

/// out[i, :] = in[rows[i], :] for i < n.
void gather_rows(float* out, const float* in, const std::int64_t* rows, std::int64_t n, int w,
                 stream_handle s = nullptr);
/// out[rows[i], :] += in[i, :] for i < n, added in order of i as the CPU kernel adds them (one
/// thread per column walks the rows: the same sums bit for bit, no atomics).
void scatter_add_rows(float* out, const float* in, const std::int64_t* rows, std::int64_t n, int w,
                      stream_handle s = nullptr);
/// out[i, :] = in[i, :] * scale[i] for i < n (out may be in).
void scale_rows(float* out, const float* in, const float* scale, std::int64_t n, int w, stream_handle s = nullptr);
/// out[i] = sum_j a[i, j] * b[i, j] for i < n (one block per row).
void row_dots(float* out, const float* a, const float* b, std::int64_t n, int w, stream_handle s = nullptr);

}  // namespace mactor::kernels::cuda

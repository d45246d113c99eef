// The Mamba mixer's kernels on a CUDA device: the column-block copies between [seq, batch] and
// [batch, seq] rows (kernels/column_copy.hpp), the causal depthwise conv1d with SiLU
// (kernels/causal_conv1d.hpp) and the gated grouped RMSNorm (kernels/gated_rmsnorm.hpp), with the
// CPU kernels' contracts: fp32 in device memory (copies: any element size), queued on stream s.
// Weight gradients are summed per channel or column by one thread block or thread each, in a
// fixed order, so a backward gives the same bits every time. The SSD scan has no CUDA kernel yet
// (the backend runs the CPU's on host copies: kernels/cuda/tensor_kernels.cpp).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/launch.hpp"

namespace mactor::kernels::cuda {

/// One side of a column-block copy: width, first column, and whether rows are [batch, seq].
struct column_side {
  int width, first_column;
  bool batch_seq;
};

/// dst's block from src's, element_bytes (2, 4 or 8) each.
void copy_columns(void* dst, column_side to, const void* src, column_side from, std::size_t element_bytes,
                  int columns, int seq, int batch, stream_handle s = nullptr);

void causal_conv1d_forward(float* y, const float* x, const float* w, const float* bias, int batch, int seq,
                           int channels, int width, bool silu, stream_handle s = nullptr);
/// dx (overwritten; may be null), dw and dbias (accumulated; may be null); dpre: batch * seq *
/// channels floats of scratch.
void causal_conv1d_backward(float* dx, float* dw, float* dbias, const float* dy, const float* x, const float* w,
                            const float* bias, float* dpre, int batch, int seq, int channels, int width, bool silu,
                            stream_handle s = nullptr);

void gated_rmsnorm_forward(float* y, float* rstd, const float* x, const float* z, const float* weight, int n, int d,
                           int group_size, float eps, stream_handle s = nullptr);
/// dx and dz (overwritten; both null for the weight's gradient alone), dweight (accumulated; may
/// be null).
void gated_rmsnorm_backward(float* dx, float* dz, float* dweight, const float* dy, const float* x, const float* z,
                            const float* weight, const float* rstd, int n, int d, int group_size,
                            stream_handle s = nullptr);

}  // namespace mactor::kernels::cuda

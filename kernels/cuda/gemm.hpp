// Row-major GEMM on a CUDA device through cuBLASLt: kernels/gemm.hpp's contract (transposes,
// leading dimensions, alpha/beta), pointers into device memory, queued on stream s.
#pragma once

#include "kernels/cuda/launch.hpp"
#include "tensor/half_float.hpp"

namespace mactor::kernels::cuda {

/// c[m, n] = alpha * op(a) · op(b) + beta * c, all row-major with leading dimensions lda/ldb/ldc;
/// op(a) is [m, k] (a is [k, m] when trans_a), op(b) is [k, n] (b is [n, k] when trans_b).
/// fp32 in and out, computed in full fp32 (no TF32). k = 0 throws cuda_error (the CPU kernel
/// scales c by beta; no layer multiplies over an empty dimension).
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
          int ldb, float beta, float* c, int ldc, stream_handle s = nullptr);

/// The same with bf16 a, b and c, accumulated in fp32 (alpha and beta are fp32).
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const tensor::bfloat16* a, int lda,
          const tensor::bfloat16* b, int ldb, float beta, tensor::bfloat16* c, int ldc, stream_handle s = nullptr);

/// bf16 a and b into an fp32 c (a weight gradient accumulated into fp32 main grads with beta 1,
/// as Megatron's --gradient-accumulation-fusion does).
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const tensor::bfloat16* a, int lda,
          const tensor::bfloat16* b, int ldb, float beta, float* c, int ldc, stream_handle s = nullptr);

}  // namespace mactor::kernels::cuda

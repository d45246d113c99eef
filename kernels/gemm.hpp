// Row-major matrix multiply on the CPU through OpenBLAS, plus the three products a linear layer
// needs (forward, input grad, weight grad). Float for training, double for gradient checks.
#pragma once
#include <cstdint>

#include "tensor/tensor.hpp"

namespace mactor::kernels {

/// c[m, n] = alpha * op(a) · op(b) + beta * c, all row-major with leading dimensions lda/ldb/ldc.
/// op(a) is [m, k] (a is [k, m] when trans_a); op(b) is [k, n] (b is [n, k] when trans_b).
template <typename T>
void gemm(bool trans_a, bool trans_b, int m, int n, int k, T alpha, const T* a, int lda,
          const T* b, int ldb, T beta, T* c, int ldc);

/// y[rows, out] = x[rows, in] · w[out, in]^T + beta * y
template <typename T>
void linear_forward(const T* x, const T* w, T* y, int rows, int in, int out, T beta = T(0));

/// dx[rows, in] = dy[rows, out] · w[out, in] + beta * dx
template <typename T>
void linear_backward_input(const T* dy, const T* w, T* dx, int rows, int in, int out,
                           T beta = T(0));

/// dw[out, in] += dy[rows, out]^T · x[rows, in]
template <typename T>
void linear_backward_weight(const T* dy, const T* x, T* dw, int rows, int in, int out);

/// Wall time and flops spent in gemm() (for benchmarks); a call made by one of k threads of a
/// parallel loop counts 1/k of its time.
struct gemm_stats {
  std::int64_t nanoseconds = 0;
  double flops = 0;
  std::int64_t calls = 0;
};
gemm_stats gemm_stats_read();
void gemm_stats_reset();


// Tensor entry points: dispatch on dtype and device (every tensor the same), sizes checked.
void linear_forward(tensor::const_tensor_view x, tensor::const_tensor_view w, tensor::tensor_view y,
                    int rows, int in, int out, double beta = 0);
void linear_backward_input(tensor::const_tensor_view dy, tensor::const_tensor_view w,
                           tensor::tensor_view dx, int rows, int in, int out, double beta = 0);
void linear_backward_weight(tensor::const_tensor_view dy, tensor::const_tensor_view x,
                            tensor::tensor_view dw, int rows, int in, int out);

}  // namespace mactor::kernels

// OpenBLAS-backed GEMM; timing counters feed the benchmark's "share of time in GEMM".
#include "kernels/gemm.hpp"
#include "kernels/cpu/typed.hpp"
#include "kernels/device_kernels.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>

namespace mactor::kernels {
namespace {

std::atomic<std::int64_t> g_nanoseconds{0};
std::atomic<std::int64_t> g_calls{0};
std::atomic<double> g_flops{0};

void call_blas(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
               const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void call_blas(bool ta, bool tb, int m, int n, int k, double alpha, const double* a, int lda,
               const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// One thread pool, not two: OpenBLAS runs single-threaded and large products are split into
// row or column blocks over the OpenMP team. With OpenBLAS's own pool next to OpenMP's, each
// pool's idle threads spin while the other works, which on 2 cores cost ~40% of a step.
template <typename T>
void split_over_threads(bool ta, bool tb, int m, int n, int k, T alpha, const T* a, int lda,
                        const T* b, int ldb, T beta, T* c, int ldc) {
  static std::once_flag single_threaded_blas;
  std::call_once(single_threaded_blas, [] { openblas_set_num_threads(1); });
  const int threads = omp_get_max_threads();
  const bool worth = threads > 1 && 2.0 * m * n * k > 4e6 && std::max(m, n) >= 32 * threads;
  if (!worth || omp_in_parallel()) {
    call_blas(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const bool by_rows = m >= n;
  const int extent = by_rows ? m : n;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), count = omp_get_num_threads();
    // Blocks of whole 16-element panels, so every thread but the last runs full kernels.
    const int step = (extent / count + 15) / 16 * 16;
    const int lo = std::min(extent, t * step);
    const int hi = t == count - 1 ? extent : std::min(extent, lo + step);
    if (hi > lo) {
      if (by_rows)
        call_blas(ta, tb, hi - lo, n, k, alpha, ta ? a + lo : a + std::int64_t(lo) * lda, lda, b,
                  ldb, beta, c + std::int64_t(lo) * ldc, ldc);
      else
        call_blas(ta, tb, m, hi - lo, k, alpha, a, lda, tb ? b + std::int64_t(lo) * ldb : b + lo,
                  ldb, beta, c + lo, ldc);
    }
  }
}

}  // namespace

template <typename T>
void gemm(bool trans_a, bool trans_b, int m, int n, int k, T alpha, const T* a, int lda,
          const T* b, int ldb, T beta, T* c, int ldc) {
  if (m == 0 || n == 0) return;
  const auto start = std::chrono::steady_clock::now();
  split_over_threads(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  // Inside a parallel loop every thread runs its own GEMMs at once: count a share of wall time.
  g_nanoseconds.fetch_add(ns / omp_get_num_threads(), std::memory_order_relaxed);
  g_calls.fetch_add(1, std::memory_order_relaxed);
  g_flops.fetch_add(2.0 * m * n * k, std::memory_order_relaxed);
}

template <typename T>
void linear_forward(const T* x, const T* w, T* y, int rows, int in, int out, T beta) {
  gemm<T>(false, true, rows, out, in, T(1), x, in, w, in, beta, y, out);
}

template <typename T>
void linear_backward_input(const T* dy, const T* w, T* dx, int rows, int in, int out, T beta) {
  gemm<T>(false, false, rows, in, out, T(1), dy, out, w, in, beta, dx, in);
}

template <typename T>
void linear_backward_weight(const T* dy, const T* x, T* dw, int rows, int in, int out) {
  gemm<T>(true, false, out, in, rows, T(1), dy, out, x, in, T(1), dw, in);
}

gemm_stats gemm_stats_read() {
  return {g_nanoseconds.load(), g_flops.load(), g_calls.load()};
}

void gemm_stats_reset() {
  g_nanoseconds = 0;
  g_flops = 0;
  g_calls = 0;
}

template void gemm<float>(bool, bool, int, int, int, float, const float*, int, const float*, int,
                          float, float*, int);
template void gemm<double>(bool, bool, int, int, int, double, const double*, int, const double*,
                           int, double, double*, int);
template void linear_forward<float>(const float*, const float*, float*, int, int, int, float);
template void linear_forward<double>(const double*, const double*, double*, int, int, int, double);
template void linear_backward_input<float>(const float*, const float*, float*, int, int, int,
                                           float);
template void linear_backward_input<double>(const double*, const double*, double*, int, int, int,
                                            double);
template void linear_backward_weight<float>(const float*, const float*, float*, int, int, int);
template void linear_backward_weight<double>(const double*, const double*, double*, int, int,
                                             int);


void linear_forward(tensor::const_tensor_view x, tensor::const_tensor_view w, tensor::tensor_view y,
                    int rows, int in, int out, double beta) {
  check_compatible("linear_forward", {x, w, y});
  detail::need("linear_forward", "x", x, std::int64_t(rows) * in);
  detail::need("linear_forward", "w", w, std::int64_t(out) * in);
  detail::need("linear_forward", "y", y, std::int64_t(rows) * out);
  if (on_device(x))
    return device_kernels_for("linear_forward", x).linear_forward(x, w, y, rows, in, out, beta);
  detail::fp32_stage stage;
  dispatch_compute("linear_forward", y.type, y.where, [&](auto zero) {
    using T = decltype(zero);
    linear_forward<T>(stage.typed<T>(x), stage.typed<T>(w),
                      beta == 0 ? stage.output<T>(y, std::int64_t(rows) * out) : stage.typed<T>(y), rows, in,
                      out, T(beta));
  });
}

void linear_backward_input(tensor::const_tensor_view dy, tensor::const_tensor_view w,
                           tensor::tensor_view dx, int rows, int in, int out, double beta) {
  check_compatible("linear_backward_input", {dy, w, dx});
  detail::need("linear_backward_input", "dy", dy, std::int64_t(rows) * out);
  detail::need("linear_backward_input", "w", w, std::int64_t(out) * in);
  detail::need("linear_backward_input", "dx", dx, std::int64_t(rows) * in);
  if (on_device(dy))
    return device_kernels_for("linear_backward_input", dy).linear_backward_input(dy, w, dx, rows,
        in, out, beta);
  detail::fp32_stage stage;
  dispatch_compute("linear_backward_input", dx.type, dx.where, [&](auto zero) {
    using T = decltype(zero);
    linear_backward_input<T>(stage.typed<T>(dy), stage.typed<T>(w),
                             beta == 0 ? stage.output<T>(dx, std::int64_t(rows) * in) : stage.typed<T>(dx),
                             rows, in, out, T(beta));
  });
}

void linear_backward_weight(tensor::const_tensor_view dy, tensor::const_tensor_view x,
                            tensor::tensor_view dw, int rows, int in, int out) {
  check_compatible("linear_backward_weight", {dy, x, dw});
  detail::need("linear_backward_weight", "dy", dy, std::int64_t(rows) * out);
  detail::need("linear_backward_weight", "x", x, std::int64_t(rows) * in);
  detail::need("linear_backward_weight", "dw", dw, std::int64_t(out) * in);
  if (on_device(dy))
    return device_kernels_for("linear_backward_weight", dy).linear_backward_weight(dy, x, dw, rows,
        in, out);
  detail::fp32_stage stage;
  dispatch_compute("linear_backward_weight", dw.type, dw.where, [&](auto zero) {
    using T = decltype(zero);
    linear_backward_weight<T>(stage.typed<T>(dy), stage.typed<T>(x), stage.typed<T>(dw),
                              rows, in, out);
  });
}

}  // namespace mactor::kernels

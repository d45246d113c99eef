// Thread control for CPU kernels: one OpenMP team runs our loops and splits large GEMMs into
// blocks (OpenBLAS itself runs single-threaded, see cpu/gemm.cpp).
#pragma once

namespace mactor::kernels {

/// Threads OpenMP loops use (OMP_NUM_THREADS or the core count).
int kernel_threads();

/// Sets the OpenMP team size the kernels use (e.g. from a --threads option).
void set_kernel_threads(int threads);

/// While alive, OpenBLAS runs single-threaded even if someone else raised its thread count, so
/// GEMMs issued from inside an OpenMP loop never wake a second pool; the count comes back when
/// the last overlapping scope ends.
class blas_single_thread_scope {
 public:
  blas_single_thread_scope();
  ~blas_single_thread_scope();
  blas_single_thread_scope(const blas_single_thread_scope&) = delete;
  blas_single_thread_scope& operator=(const blas_single_thread_scope&) = delete;
};

}  // namespace mactor::kernels

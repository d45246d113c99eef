// Thread control for CPU kernels: OpenMP for loops we write, OpenBLAS's own pool for GEMMs.
// Kernels that call many small GEMMs from OpenMP threads pin BLAS to one thread meanwhile.
#pragma once

namespace mactor::kernels {

/// Threads OpenMP loops use (OMP_NUM_THREADS or the core count).
int kernel_threads();

/// Sets both OpenMP's and OpenBLAS's thread counts (e.g. from a --threads option).
void set_kernel_threads(int threads);

/// While alive, OpenBLAS runs single-threaded, so GEMMs issued from inside an OpenMP loop do
/// not each wake the BLAS pool; the count comes back when the last overlapping scope ends.
class blas_single_thread_scope {
 public:
  blas_single_thread_scope();
  ~blas_single_thread_scope();
  blas_single_thread_scope(const blas_single_thread_scope&) = delete;
  blas_single_thread_scope& operator=(const blas_single_thread_scope&) = delete;
};

}  // namespace mactor::kernels

// OpenMP / OpenBLAS thread counts.
#include "kernels/threads.hpp"

#include <cblas.h>
#include <omp.h>

namespace mactor::kernels {

int kernel_threads() { return omp_get_max_threads(); }

void set_kernel_threads(int threads) {
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

blas_single_thread_scope::blas_single_thread_scope() : previous_(openblas_get_num_threads()) {
  openblas_set_num_threads(1);
}

blas_single_thread_scope::~blas_single_thread_scope() { openblas_set_num_threads(previous_); }

}  // namespace mactor::kernels

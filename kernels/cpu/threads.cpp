// OpenMP / OpenBLAS thread counts.
#include "kernels/threads.hpp"

#include <cblas.h>
#include <omp.h>

#include <mutex>

namespace mactor::kernels {

int kernel_threads() { return omp_get_max_threads(); }

void set_kernel_threads(int threads) { omp_set_num_threads(threads); }

namespace {
// Scopes may overlap when several threads (e.g. in-process tensor-parallel ranks) run kernels:
// the first one in saves the count and the last one out restores it.
std::mutex g_scope_mutex;
int g_scope_depth = 0;
int g_saved_threads = 1;
}  // namespace

blas_single_thread_scope::blas_single_thread_scope() {
  std::lock_guard lock(g_scope_mutex);
  if (g_scope_depth++ == 0) {
    g_saved_threads = openblas_get_num_threads();
    if (g_saved_threads != 1) openblas_set_num_threads(1);
  }
}

blas_single_thread_scope::~blas_single_thread_scope() {
  std::lock_guard lock(g_scope_mutex);
  if (--g_scope_depth == 0 && g_saved_threads != 1) openblas_set_num_threads(g_saved_threads);
}

}  // namespace mactor::kernels

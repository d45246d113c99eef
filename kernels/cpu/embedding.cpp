// Embedding gather and scatter-add. The backward splits the hidden dimension across threads,
// so two tokens with the same id never race on one row.
#include "kernels/embedding.hpp"

#include <omp.h>

#include <algorithm>

namespace mactor::kernels {

template <typename T>
void embedding_forward(T* out, const T* table, const std::int32_t* ids, int n, int hidden,
                       int vocab_start, int vocab_end, T beta) {
#pragma omp parallel for schedule(static) if (n * hidden > 32768)
  for (int i = 0; i < n; ++i) {
    T* o = out + static_cast<std::int64_t>(i) * hidden;
    const int id = ids[i];
    const bool inside = id >= vocab_start && id < vocab_end;
    const T* row = inside ? table + static_cast<std::int64_t>(id - vocab_start) * hidden : nullptr;
    for (int j = 0; j < hidden; ++j) {
      const T v = inside ? row[j] : T(0);
      o[j] = beta == T(0) ? v : beta * o[j] + v;
    }
  }
}

template <typename T>
void embedding_backward(T* dtable, const T* dout, const std::int32_t* ids, int n, int hidden,
                        int vocab_start, int vocab_end) {
#pragma omp parallel if (n * hidden > 32768)
  {
    const int threads = omp_get_num_threads();
    const int t = omp_get_thread_num();
    const int chunk = (hidden + threads - 1) / threads;
    const int j0 = std::min(hidden, t * chunk);
    const int j1 = std::min(hidden, j0 + chunk);
    for (int i = 0; i < n; ++i) {
      const int id = ids[i];
      if (id < vocab_start || id >= vocab_end) continue;
      T* row = dtable + static_cast<std::int64_t>(id - vocab_start) * hidden;
      const T* g = dout + static_cast<std::int64_t>(i) * hidden;
      for (int j = j0; j < j1; ++j) row[j] += g[j];
    }
  }
}

template void embedding_forward<float>(float*, const float*, const std::int32_t*, int, int, int,
                                       int, float);
template void embedding_forward<double>(double*, const double*, const std::int32_t*, int, int, int,
                                        int, double);
template void embedding_backward<float>(float*, const float*, const std::int32_t*, int, int, int,
                                        int);
template void embedding_backward<double>(double*, const double*, const std::int32_t*, int, int,
                                         int, int);

}  // namespace mactor::kernels

// Vocab-shard cross-entropy steps; each row is independent, so rows are split across threads.
#include "kernels/cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mactor::kernels {

template <typename T>
void cross_entropy_row_max(T* row_max, const T* logits, int n, int v) {
#pragma omp parallel for schedule(static) if (std::int64_t(n) * v > 32768)
  for (int i = 0; i < n; ++i) {
    const T* row = logits + std::int64_t(i) * v;
    T mx = -std::numeric_limits<T>::infinity();
    for (int j = 0; j < v; ++j) mx = std::max(mx, row[j]);
    row_max[i] = mx;
  }
}

template <typename T>
void cross_entropy_shard_sums(T* sum_exp, T* target_logit, const T* logits, const T* row_max,
                              const std::int32_t* labels, int n, int v, int vocab_start) {
#pragma omp parallel for schedule(static) if (std::int64_t(n) * v > 32768)
  for (int i = 0; i < n; ++i) {
    const T* row = logits + std::int64_t(i) * v;
    const T mx = row_max[i];
    T sum = 0;
    for (int j = 0; j < v; ++j) sum += std::exp(row[j] - mx);
    sum_exp[i] = sum;
    const int local = labels[i] - vocab_start;
    target_logit[i] = local >= 0 && local < v ? row[local] : T(0);
  }
}

template <typename T>
void cross_entropy_loss(T* loss, const T* sum_exp, const T* row_max, const T* target_logit,
                        int n) {
  for (int i = 0; i < n; ++i) loss[i] = std::log(sum_exp[i]) + row_max[i] - target_logit[i];
}

template <typename T>
void cross_entropy_backward(T* dlogits, const T* logits, const T* row_max, const T* sum_exp,
                            const std::int32_t* labels, const T* grad_scale, int n, int v,
                            int vocab_start) {
#pragma omp parallel for schedule(static) if (std::int64_t(n) * v > 32768)
  for (int i = 0; i < n; ++i) {
    const T* row = logits + std::int64_t(i) * v;
    T* drow = dlogits + std::int64_t(i) * v;
    const T g = grad_scale[i];
    if (g == T(0)) {
      std::fill_n(drow, v, T(0));
      continue;
    }
    const T mx = row_max[i];
    const T scale = g / sum_exp[i];
    for (int j = 0; j < v; ++j) drow[j] = std::exp(row[j] - mx) * scale;
    const int local = labels[i] - vocab_start;
    if (local >= 0 && local < v) drow[local] -= g;
  }
}

template void cross_entropy_row_max<float>(float*, const float*, int, int);
template void cross_entropy_row_max<double>(double*, const double*, int, int);
template void cross_entropy_shard_sums<float>(float*, float*, const float*, const float*,
                                              const std::int32_t*, int, int, int);
template void cross_entropy_shard_sums<double>(double*, double*, const double*, const double*,
                                               const std::int32_t*, int, int, int);
template void cross_entropy_loss<float>(float*, const float*, const float*, const float*, int);
template void cross_entropy_loss<double>(double*, const double*, const double*, const double*,
                                         int);
template void cross_entropy_backward<float>(float*, const float*, const float*, const float*,
                                            const std::int32_t*, const float*, int, int, int);
template void cross_entropy_backward<double>(double*, const double*, const double*,
                                             const double*, const std::int32_t*, const double*,
                                             int, int, int);

}  // namespace mactor::kernels

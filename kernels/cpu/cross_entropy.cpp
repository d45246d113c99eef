// Vocab-shard cross-entropy steps; each row is independent, so rows are split across threads.
// Float rows go through the SIMD helpers in vector_math; double keeps std::exp.
#include "kernels/cross_entropy.hpp"
#include "kernels/cpu/typed.hpp"
#include "kernels/device_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/cpu/vector_math.hpp"

namespace mactor::kernels {
namespace {

template <typename T>
T max_of(const T* row, int v) {
  if constexpr (std::is_same_v<T, float>) {
    return detail::row_max(row, v);
  } else {
    T mx = -std::numeric_limits<T>::infinity();
    for (int j = 0; j < v; ++j) mx = std::max(mx, row[j]);
    return mx;
  }
}

template <typename T>
T exp_sum(T* row, int v, T shift) {
  if constexpr (std::is_same_v<T, float>) {
    return detail::exp_shifted_sum(row, v, shift);
  } else {
    T sum = 0;
    for (int j = 0; j < v; ++j) sum += (row[j] = std::exp(row[j] - shift));
    return sum;
  }
}

}  // namespace

template <typename T>
void cross_entropy_row_max(T* row_max, const T* logits, int n, int v) {
#pragma omp parallel for schedule(static) if (std::int64_t(n) * v > 32768)
  for (int i = 0; i < n; ++i) row_max[i] = max_of(logits + std::int64_t(i) * v, v);
}

template <typename T>
void cross_entropy_shard_sums(T* sum_exp, T* target_logit, T* logits, const T* row_max,
                              const std::int32_t* labels, int n, int v, int vocab_start) {
#pragma omp parallel for schedule(static) if (std::int64_t(n) * v > 32768)
  for (int i = 0; i < n; ++i) {
    T* row = logits + std::int64_t(i) * v;
    const int local = labels[i] - vocab_start;
    target_logit[i] = local >= 0 && local < v ? row[local] : T(0);
    sum_exp[i] = exp_sum(row, v, row_max[i]);
  }
}

template <typename T>
void cross_entropy_loss(T* loss, const T* sum_exp, const T* row_max, const T* target_logit,
                        int n) {
  for (int i = 0; i < n; ++i) loss[i] = std::log(sum_exp[i]) + row_max[i] - target_logit[i];
}

template <typename T>
void cross_entropy_backward(T* exps, const T* sum_exp, const std::int32_t* labels,
                            const T* grad_scale, int n, int v, int vocab_start) {
#pragma omp parallel for schedule(static) if (std::int64_t(n) * v > 32768)
  for (int i = 0; i < n; ++i) {
    T* row = exps + std::int64_t(i) * v;
    const T g = grad_scale[i];
    const T scale = g / sum_exp[i];
#pragma omp simd
    for (int j = 0; j < v; ++j) row[j] *= scale;
    const int local = labels[i] - vocab_start;
    if (local >= 0 && local < v) row[local] -= g;
  }
}

template void cross_entropy_row_max<float>(float*, const float*, int, int);
template void cross_entropy_row_max<double>(double*, const double*, int, int);
template void cross_entropy_shard_sums<float>(float*, float*, float*, const float*,
                                              const std::int32_t*, int, int, int);
template void cross_entropy_shard_sums<double>(double*, double*, double*, const double*,
                                               const std::int32_t*, int, int, int);
template void cross_entropy_loss<float>(float*, const float*, const float*, const float*, int);
template void cross_entropy_loss<double>(double*, const double*, const double*, const double*,
                                         int);
template void cross_entropy_backward<float>(float*, const float*, const std::int32_t*,
                                            const float*, int, int, int);
template void cross_entropy_backward<double>(double*, const double*, const std::int32_t*,
                                             const double*, int, int, int);


void cross_entropy_row_max(tensor::tensor_view row_max, tensor::const_tensor_view logits, int n,
                           int v) {
  const char* k = "cross_entropy_row_max";
  check_compatible(k, {row_max, logits});
  detail::need(k, "row_max", row_max, n), detail::need(k, "logits", logits, std::int64_t(n) * v);
  if (on_device(row_max))
    return device_kernels_for("cross_entropy_row_max", row_max).cross_entropy_row_max(row_max,
        logits, n, v);
  detail::fp32_stage stage;
  dispatch_compute(k, logits.type, logits.where, [&](auto zero) {
    using T = decltype(zero);
    cross_entropy_row_max<T>(stage.typed<T>(row_max), stage.typed<T>(logits), n, v);
  });
}

void cross_entropy_shard_sums(tensor::tensor_view sum_exp, tensor::tensor_view target_logit,
                              tensor::tensor_view logits, tensor::const_tensor_view row_max,
                              const std::int32_t* labels, int n, int v, int vocab_start) {
  const char* k = "cross_entropy_shard_sums";
  check_compatible(k, {sum_exp, target_logit, logits, row_max});
  detail::need(k, "sum_exp", sum_exp, n), detail::need(k, "target_logit", target_logit, n);
  detail::need(k, "logits", logits, std::int64_t(n) * v), detail::need(k, "row_max", row_max, n);
  if (on_device(sum_exp))
    return device_kernels_for("cross_entropy_shard_sums", sum_exp).cross_entropy_shard_sums(sum_exp,
        target_logit, logits, row_max, labels, n, v, vocab_start);
  detail::fp32_stage stage;
  dispatch_compute(k, logits.type, logits.where, [&](auto zero) {
    using T = decltype(zero);
    cross_entropy_shard_sums<T>(stage.typed<T>(sum_exp), stage.typed<T>(target_logit),
                                stage.typed<T>(logits), stage.typed<T>(row_max), labels, n, v,
                                vocab_start);
  });
}

void cross_entropy_loss(tensor::tensor_view loss, tensor::const_tensor_view sum_exp,
                        tensor::const_tensor_view row_max, tensor::const_tensor_view target_logit,
                        int n) {
  const char* k = "cross_entropy_loss";
  check_compatible(k, {loss, sum_exp, row_max, target_logit});
  detail::need(k, "loss", loss, n), detail::need(k, "sum_exp", sum_exp, n);
  detail::need(k, "row_max", row_max, n), detail::need(k, "target_logit", target_logit, n);
  if (on_device(loss))
    return device_kernels_for("cross_entropy_loss", loss).cross_entropy_loss(loss, sum_exp, row_max,
        target_logit, n);
  detail::fp32_stage stage;
  dispatch_compute(k, loss.type, loss.where, [&](auto zero) {
    using T = decltype(zero);
    cross_entropy_loss<T>(stage.output<T>(loss, n), stage.typed<T>(sum_exp),
                          stage.typed<T>(row_max), stage.typed<T>(target_logit), n);
  });
}

void cross_entropy_backward(tensor::tensor_view exps, tensor::const_tensor_view sum_exp,
                            const std::int32_t* labels, tensor::const_tensor_view grad_scale,
                            int n, int v, int vocab_start) {
  const char* k = "cross_entropy_backward";
  check_compatible(k, {exps, sum_exp, grad_scale});
  detail::need(k, "exps", exps, std::int64_t(n) * v), detail::need(k, "sum_exp", sum_exp, n);
  detail::need(k, "grad_scale", grad_scale, n);
  if (on_device(exps))
    return device_kernels_for("cross_entropy_backward", exps).cross_entropy_backward(exps, sum_exp,
        labels, grad_scale, n, v, vocab_start);
  detail::fp32_stage stage;
  dispatch_compute(k, exps.type, exps.where, [&](auto zero) {
    using T = decltype(zero);
    cross_entropy_backward<T>(stage.typed<T>(exps), stage.typed<T>(sum_exp), labels,
                              stage.typed<T>(grad_scale), n, v, vocab_start);
  });
}

}  // namespace mactor::kernels

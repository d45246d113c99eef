// Embedding gather and scatter-add. The backward splits the hidden dimension across threads,
// so two tokens with the same id never race on one row.
#include "kernels/embedding.hpp"
#include "kernels/cpu/typed.hpp"
#include "kernels/device_kernels.hpp"

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


void embedding_forward(tensor::tensor_view out, tensor::const_tensor_view table,
                       const std::int32_t* ids, int n, int hidden, int vocab_start, int vocab_end,
                       double beta) {
  check_compatible("embedding_forward", {out, table});
  detail::need("embedding_forward", "out", out, std::int64_t(n) * hidden);
  detail::need("embedding_forward", "table", table,
               std::int64_t(vocab_end - vocab_start) * hidden);
  if (on_device(out))
    return device_kernels_for("embedding_forward", out).embedding_forward(out, table, ids, n,
        hidden, vocab_start, vocab_end, beta);
  detail::fp32_stage stage;
  dispatch_compute("embedding_forward", out.type, out.where, [&](auto zero) {
    using T = decltype(zero);
    embedding_forward<T>(stage.typed<T>(out), stage.typed<T>(table), ids, n, hidden,
                         vocab_start, vocab_end, T(beta));
  });
}

void embedding_backward(tensor::tensor_view dtable, tensor::const_tensor_view dout,
                        const std::int32_t* ids, int n, int hidden, int vocab_start,
                        int vocab_end) {
  check_compatible("embedding_backward", {dtable, dout});
  detail::need("embedding_backward", "dtable", dtable,
               std::int64_t(vocab_end - vocab_start) * hidden);
  detail::need("embedding_backward", "dout", dout, std::int64_t(n) * hidden);
  if (on_device(dtable))
    return device_kernels_for("embedding_backward", dtable).embedding_backward(dtable, dout, ids, n,
        hidden, vocab_start, vocab_end);
  detail::fp32_stage stage;
  dispatch_compute("embedding_backward", dtable.type, dtable.where, [&](auto zero) {
    using T = decltype(zero);
    embedding_backward<T>(stage.typed<T>(dtable), stage.typed<T>(dout), ids, n, hidden,
                          vocab_start, vocab_end);
  });
}

}  // namespace mactor::kernels

// Chunked output projection + vocab-parallel cross-entropy + their backward.
#include "model/output_layer_loss.hpp"

#include <algorithm>

#include "kernels/cross_entropy.hpp"
#include "kernels/gemm.hpp"

namespace mactor::model {
namespace {
constexpr std::int64_t logits_chunk_elements = std::int64_t(1) << 24;  // 64 MiB of float logits
}

template <typename T>
output_layer_loss<T>::output_layer_loss(parameter_store<T>& store, const gpt_model_config& c,
                                        int tp_rank, int tp_size, int tied_weight)
    : hidden_(c.hidden_size), vocab_local_(c.padded_vocab_size / tp_size),
      vocab_start_(tp_rank * vocab_local_), weight_(tied_weight),
      sequence_parallel_(c.sequence_parallel && tp_size > 1) {
  if (weight_ < 0)
    weight_ = store.add("output_layer.weight", {c.padded_vocab_size, c.hidden_size},
                        tp_split::rows, init_kind::normal, c.init_method_std);
}

// row_max <- the max over all ranks (Megatron all-reduces with MAX; a gather does the same).
template <typename T>
void output_layer_loss<T>::combine_over_ranks(group& tp, int n) {
  if (tp.size() == 1) return;
  gathered_.resize(std::size_t(n) * tp.size());
  tp.all_gather(row_max_.data(), gathered_.data(), n);
  for (int r = 0; r < tp.size(); ++r)
    for (int i = 0; i < n; ++i) row_max_[i] = std::max(row_max_[i], gathered_[r * n + i]);
}

template <typename T>
double output_layer_loss<T>::forward_backward(parameter_store<T>& store, group& tp, const T* h,
                                              const std::int32_t* labels, const float* mask,
                                              T grad_scale, T* dh, int rows) {
  T* dh_shard = dh;
  if (sequence_parallel_) {
    // The final norm's output arrives as sequence shards: gather all rows (Megatron's output
    // layer all-gathers its input), and reduce-scatter the input gradient back to the shards.
    const std::size_t shard = std::size_t(rows / tp.size()) * hidden_;
    h_full_.resize(shard * tp.size());
    tp.all_gather(h, h_full_.data(), shard);
    h = h_full_.data();
    if (dh) dh_full_.resize(shard * tp.size()), dh = dh_full_.data();
  }
  const int chunk = int(std::clamp<std::int64_t>(logits_chunk_elements / vocab_local_, 1, rows));
  logits_.resize(std::size_t(chunk) * vocab_local_);
  row_max_.resize(chunk), sums_.resize(2 * chunk), loss_.resize(chunk), scale_.resize(chunk);
  const T* w = store.value(weight_);
  double total = 0;
  for (int r0 = 0; r0 < rows; r0 += chunk) {
    const int n = std::min(chunk, rows - r0);
    const T* hc = h + std::int64_t(r0) * hidden_;
    kernels::linear_forward<T>(hc, w, logits_.data(), n, hidden_, vocab_local_);
    kernels::cross_entropy_row_max<T>(row_max_.data(), logits_.data(), n, vocab_local_);
    combine_over_ranks(tp, n);
    T* sum_exp = sums_.data();
    T* target = sums_.data() + n;
    kernels::cross_entropy_shard_sums<T>(sum_exp, target, logits_.data(), row_max_.data(),
                                         labels + r0, n, vocab_local_, vocab_start_);
    if (tp.size() > 1) tp.all_reduce_sum(sums_.data(), std::size_t(2) * n);
    kernels::cross_entropy_loss<T>(loss_.data(), sum_exp, row_max_.data(), target, n);
    for (int i = 0; i < n; ++i) total += double(loss_[i]) * mask[r0 + i];
    if (!dh) continue;
    for (int i = 0; i < n; ++i) scale_[i] = T(mask[r0 + i]) * grad_scale;
    kernels::cross_entropy_backward<T>(logits_.data(), sum_exp, labels + r0, scale_.data(), n,
                                       vocab_local_, vocab_start_);
    kernels::linear_backward_weight<T>(logits_.data(), hc, store.grad(weight_), n, hidden_,
                                       vocab_local_);
    kernels::linear_backward_input<T>(logits_.data(), w, dh + std::int64_t(r0) * hidden_, n,
                                      hidden_, vocab_local_);
  }
  if (dh && sequence_parallel_)
    tp.reduce_scatter_sum(dh, dh_shard, std::size_t(rows / tp.size()) * hidden_);
  else if (dh && tp.size() > 1)
    tp.all_reduce_sum(dh, std::size_t(rows) * hidden_);
  return total;
}

template class output_layer_loss<float>;
template class output_layer_loss<double>;

}  // namespace mactor::model

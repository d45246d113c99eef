// Chunked output projection + vocab-parallel cross-entropy + their backward.
#include "model/output_layer_loss.hpp"

#include <algorithm>

#include "kernels/convert.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/gemm.hpp"
#include "model/activation.hpp"
#include "tensor/transfer.hpp"

namespace mactor::model {
namespace {
constexpr std::int64_t logits_chunk_elements = std::int64_t(1) << 24;  // 64 MiB of float logits
}

output_layer_loss::output_layer_loss(parameter_store& store, const gpt_model_config& c,
                                     int tp_rank, int tp_size, int tied_weight)
    : hidden_(c.hidden_size), vocab_local_(c.padded_vocab_size / tp_size),
      vocab_start_(tp_rank * vocab_local_), weight_(tied_weight),
      sequence_parallel_(c.sequence_parallel && tp_size > 1) {
  if (weight_ < 0)
    weight_ = store.add("output_layer.weight", {c.padded_vocab_size, c.hidden_size},
                        tp_split::rows, init_kind::normal, c.init_method_std);
}

// row_max <- the max over all ranks (Megatron all-reduces with MAX; a gather does the same).
void output_layer_loss::combine_over_ranks(group& tp, int n) {
  if (tp.size() == 1) return;
  auto gathered = ensure_activation(gathered_, tp.size(), n, row_max_.type());
  tp.all_gather(elements(row_max_.view(), 0, n), gathered);
  // On the host (n values per rank), wherever the model is.
  const auto maxima = elements(row_max_.view(), 0, n);
  kernels::dispatch_floating("output_layer_loss", gathered.type, tensor::cpu, [&](auto zero) {
    using T = decltype(zero);
    auto row_max = tensor::host_copy<T>(maxima);
    const auto all = tensor::host_copy<T>(gathered);
    for (int r = 0; r < tp.size(); ++r)
      for (int i = 0; i < n; ++i) row_max[i] = std::max(row_max[i], all[r * n + i]);
    tensor::copy_between(maxima, tensor::view_of(std::span<const T>(row_max)));
  });
}

double output_layer_loss::forward_backward(parameter_store& store, group& tp,
                                           tensor::const_tensor_view h,
                                           const std::int32_t* labels, const float* mask,
                                           double grad_scale, tensor::tensor_view dh, int rows) {
  const auto type = h.type;
  const bool backward = dh.data != nullptr;
  tensor::tensor_view dh_shard = dh;
  if (sequence_parallel_) {
    // The final norm's output arrives as sequence shards: gather all rows (Megatron's output
    // layer all-gathers its input), and reduce-scatter the input gradient back to the shards.
    const std::int64_t shard = std::int64_t(rows / tp.size()) * hidden_;
    auto h_full = ensure_activation(h_full_, rows, hidden_, type);
    tp.all_gather(elements(h, 0, shard), h_full);
    h = h_full;
    if (backward) dh = ensure_activation(dh_full_, rows, hidden_, type);
  }
  const int chunk = int(std::clamp<std::int64_t>(logits_chunk_elements / vocab_local_, 1, rows));
  // The cross-entropy runs in the compute dtype: Megatron's vocab-parallel cross-entropy takes
  // logits.float(). A 16-bit model's output layer makes 16-bit logits and gets a 16-bit logit
  // gradient back: the fp32 buffer holds exactly those values (round_through), so no 16-bit
  // copy of the largest activation is needed.
  const auto stats = kernels::compute_dtype(type);
  ensure_activation(logits_, chunk, vocab_local_, stats);
  ensure_activation(row_max_, chunk, 1, stats);
  ensure_activation(sums_, 2, chunk, stats);
  ensure_activation(loss_, chunk, 1, stats);
  ensure_activation(scale_, chunk, 1, stats);
  const auto w = store.value(weight_);
  const tensor::tensor_view logits = logits_;
  double total = 0;
  for (int r0 = 0; r0 < rows; r0 += chunk) {
    const int n = std::min(chunk, rows - r0);
    const auto hc = elements(h, std::int64_t(r0) * hidden_, std::int64_t(n) * hidden_);
    const auto chunk_logits = elements(logits, 0, std::int64_t(n) * vocab_local_);
    kernels::linear_forward(hc, w, logits, n, hidden_, vocab_local_);
    kernels::round_through(chunk_logits, type);
    kernels::cross_entropy_row_max(row_max_, logits, n, vocab_local_);
    combine_over_ranks(tp, n);
    // sums_ holds [sum_exp[0, n); target[0, n)] contiguously, reduced in one call.
    tensor::tensor_view sums = sums_;
    const auto sum_exp = elements(sums, 0, n), target = elements(sums, n, n);
    kernels::cross_entropy_shard_sums(sum_exp, target, logits, row_max_, labels + r0, n,
                                      vocab_local_, vocab_start_);
    if (tp.size() > 1) tp.all_reduce_sum(elements(sums, 0, 2 * std::int64_t(n)));
    kernels::cross_entropy_loss(loss_, sum_exp, row_max_, target, n);
    // The masked sum and the loss gradient's row scales on the host (n values each), wherever
    // the model is.
    kernels::dispatch_floating("output_layer_loss", stats, tensor::cpu, [&](auto zero) {
      using T = decltype(zero);
      const auto loss = tensor::host_copy<T>(elements(loss_.view(), 0, n));
      for (int i = 0; i < n; ++i) total += double(loss[std::size_t(i)]) * mask[r0 + i];
      if (!backward) return;
      std::vector<T> scale(static_cast<std::size_t>(n));
      for (int i = 0; i < n; ++i) scale[std::size_t(i)] = T(mask[r0 + i]) * T(grad_scale);
      tensor::copy_between(elements(scale_.view(), 0, n), tensor::view_of(std::span<const T>(scale)));
    });
    if (!backward) continue;
    kernels::cross_entropy_backward(logits, sum_exp, labels + r0, scale_, n, vocab_local_,
                                    vocab_start_);
    kernels::round_through(chunk_logits, type);  // logits now hold their gradient
    kernels::linear_backward_weight(logits, hc, store.grad(weight_), n, hidden_, vocab_local_);
    kernels::linear_backward_input(logits, w,
                                   elements(dh, std::int64_t(r0) * hidden_,
                                            std::int64_t(n) * hidden_),
                                   n, hidden_, vocab_local_);
  }
  const std::int64_t local = std::int64_t(sequence_parallel_ ? rows / tp.size() : rows) * hidden_;
  if (backward && sequence_parallel_)
    tp.reduce_scatter_sum(dh, elements(dh_shard, 0, local));
  else if (backward && tp.size() > 1)
    tp.all_reduce_sum(elements(dh, 0, local));
  return total;
}

}  // namespace mactor::model

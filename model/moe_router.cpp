// Top-k routing, the load-balancing and z losses, and their backward.
#include "model/moe_router.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/convert.hpp"
#include "kernels/gemm.hpp"
#include "model/activation.hpp"

namespace mactor::model {
moe_router::moe_router(parameter_store& store, const std::string& name, const gpt_model_config& c)
    : weight_(store.add(name + ".weight", {c.moe.num_experts, c.hidden_size}, tp_split::replicated,
                        init_kind::normal, c.init_method_std)),
      experts_(c.moe.num_experts), topk_(c.moe.router_topk), hidden_(c.hidden_size),
      pre_softmax_(c.moe.router_pre_softmax), per_token_loss_(c.moe.per_token_loss),
      scaling_(c.moe.router_topk_scaling_factor), balancing_(c.moe.load_balancing),
      aux_coeff_(c.moe.aux_loss_coeff), z_coeff_(c.moe.z_loss_coeff) {}

void moe_router::forward(const parameter_store& store, tensor::const_tensor_view x, int seq,
                         int batch, bool training) {
  seq_ = seq, batch_ = batch, rows_ = seq * batch, training_ = training;
  auto logits = ensure_activation(logits_tensor_, rows_, experts_, x.type);
  kernels::linear_forward(x, store.value(weight_), logits, rows_, hidden_, experts_);
  logits_.resize(std::size_t(rows_) * experts_);
  kernels::convert(tensor::view_of(std::span<double>(logits_)), logits);
  route();
}

void moe_router::route() {
  const int E = experts_, k = topk_;
  softmax_.assign(std::size_t(rows_) * E, 0.0);
  lse_.assign(rows_, 0.0);
  top_.assign(std::size_t(rows_) * k, 0);
  probs_.assign(std::size_t(rows_) * k, 0.0);
  topk_softmax_.assign(std::size_t(rows_) * k, 0.0);
  std::vector<int> order(E);
  for (int t = 0; t < rows_; ++t) {
    const double* l = &logits_[std::size_t(t) * E];
    double* s = &softmax_[std::size_t(t) * E];
    const double m = *std::max_element(l, l + E);
    double sum = 0;
    for (int e = 0; e < E; ++e) sum += (s[e] = std::exp(l[e] - m));
    for (int e = 0; e < E; ++e) s[e] /= sum;
    lse_[t] = m + std::log(sum);
    // torch.topk: the k largest, largest first (ties to the lower index).
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int a, int b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
    int* top = &top_[std::size_t(t) * k];
    double* q = &topk_softmax_[std::size_t(t) * k];
    std::copy(order.begin(), order.begin() + k, top);
    const double top_max = l[top[0]];
    double top_sum = 0;
    for (int j = 0; j < k; ++j) top_sum += (q[j] = std::exp(l[top[j]] - top_max));
    for (int j = 0; j < k; ++j) q[j] /= top_sum;
    for (int j = 0; j < k; ++j)
      probs_[std::size_t(t) * k + j] = (pre_softmax_ ? s[top[j]] : q[j]) * scaling_.value_or(1.0);
  }
  losses_ = {};
  tokens_per_expert_.clear();
  if (!training_) return;
  const double T = rows_;
  if (aux_coeff_ > 0 && balancing_ != moe_load_balancing::none) {
    // The routing map of the aux loss is the top-k of the full softmax: top_ (softmax is monotone).
    const bool seq_level = balancing_ == moe_load_balancing::seq_aux_loss;
    const int groups = seq_level ? batch_ : 1;
    tokens_per_expert_.assign(std::size_t(groups) * E, 0.0);
    std::vector<double> score_sums(std::size_t(groups) * E, 0.0);
    for (int t = 0; t < rows_; ++t) {
      const int g = seq_level ? t % batch_ : 0;
      for (int j = 0; j < k; ++j) tokens_per_expert_[std::size_t(g) * E + top_[std::size_t(t) * k + j]] += 1;
      for (int e = 0; e < E; ++e) score_sums[std::size_t(g) * E + e] += softmax_[std::size_t(t) * E + e];
    }
    const double n = seq_level ? seq_ : T;
    double sum = 0;
    for (std::size_t i = 0; i < score_sums.size(); ++i) sum += score_sums[i] * tokens_per_expert_[i];
    const double loss_over_coeff = sum * E / (k * n * n) / groups;
    (seq_level ? losses_.seq_load_balancing_loss : losses_.load_balancing_loss) = loss_over_coeff;
  }
  if (z_coeff_) {
    double sq = 0;
    for (double v : lse_) sq += v * v;
    losses_.z_loss = sq / T;
  }
}

void moe_router::add_softmax_gradient(std::vector<double>& dlogits, const std::vector<double>& g) const {
  const int E = experts_;
  for (int t = 0; t < rows_; ++t) {
    const double* s = &softmax_[std::size_t(t) * E];
    const double* gt = &g[std::size_t(t) * E];
    double dot = 0;
    for (int e = 0; e < E; ++e) dot += s[e] * gt[e];
    for (int e = 0; e < E; ++e) dlogits[std::size_t(t) * E + e] += s[e] * (gt[e] - dot);
  }
}

void moe_router::add_aux_loss_gradients(std::vector<double>& dlogits, double scale) const {
  if (!training_) return;
  const int E = experts_, k = topk_;
  // Megatron multiplies each auxiliary loss by the local token count under per-token loss.
  const double unit = scale * (per_token_loss_ ? rows_ : 1.0);
  if (!tokens_per_expert_.empty()) {
    const bool seq_level = balancing_ == moe_load_balancing::seq_aux_loss;
    const double n = seq_level ? seq_ : rows_;
    const double groups = seq_level ? batch_ : 1;
    const double c = unit * aux_coeff_ * E / (k * n * n) / groups;
    std::vector<double> g(std::size_t(rows_) * E);
    for (int t = 0; t < rows_; ++t)
      for (int e = 0; e < E; ++e)
        g[std::size_t(t) * E + e] = c * tokens_per_expert_[std::size_t(seq_level ? t % batch_ : 0) * E + e];
    add_softmax_gradient(dlogits, g);
  }
  if (z_coeff_) {
    // z = coeff * mean_t(lse_t^2): dz/dlogits[t, e] = coeff * 2 lse_t softmax[t, e] / rows.
    const double c = unit * *z_coeff_ * 2.0 / rows_;
    for (int t = 0; t < rows_; ++t)
      for (int e = 0; e < E; ++e)
        dlogits[std::size_t(t) * E + e] += c * lse_[t] * softmax_[std::size_t(t) * E + e];
  }
}

void moe_router::backward(parameter_store& store, const std::vector<double>& dprobs,
                          tensor::const_tensor_view x, tensor::tensor_view dx, double aux_loss_scale) {
  const int E = experts_, k = topk_;
  const double sf = scaling_.value_or(1.0);
  std::vector<double> dlogits(std::size_t(rows_) * E, 0.0);
  if (pre_softmax_) {
    std::vector<double> g(std::size_t(rows_) * E, 0.0);
    for (int t = 0; t < rows_; ++t)
      for (int j = 0; j < k; ++j)
        g[std::size_t(t) * E + top_[std::size_t(t) * k + j]] = dprobs[std::size_t(t) * k + j] * sf;
    add_softmax_gradient(dlogits, g);
  } else {
    for (int t = 0; t < rows_; ++t) {
      const double* q = &topk_softmax_[std::size_t(t) * k];
      const double* dp = &dprobs[std::size_t(t) * k];
      double dot = 0;
      for (int j = 0; j < k; ++j) dot += q[j] * dp[j] * sf;
      for (int j = 0; j < k; ++j)
        dlogits[std::size_t(t) * E + top_[std::size_t(t) * k + j]] += q[j] * (dp[j] * sf - dot);
    }
  }
  add_aux_loss_gradients(dlogits, aux_loss_scale);
  auto dl = ensure_activation(dlogits_tensor_, rows_, E, x.type);
  kernels::convert(dl, tensor::view_of(std::span<const double>(dlogits)));
  kernels::linear_backward_weight(dl, x, store.grad(weight_), rows_, hidden_, E);
  kernels::linear_backward_input(dl, store.value(weight_), dx, rows_, hidden_, E, 1.0);
}

}  // namespace mactor::model

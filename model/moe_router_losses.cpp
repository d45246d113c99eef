// The router's auxiliary losses (Megatron's switch_load_balancing_loss_func at the micro-batch
// (aux_loss), sequence (seq_aux_loss) and global batch (global_aux_loss) level, each with its own
// coefficient, and the z-loss)
// and their gradients through the scores into the logits.
#include <cmath>
#include <numeric>

#include "model/moe_router.hpp"

namespace mactor::model {

const double* moe_router::aux_scores(int t) const {
  return sigmoid_ ? &aux_scores_[std::size_t(t) * experts_] : &softmax_[std::size_t(t) * experts_];
}

void moe_router::aux_losses_forward() {
  const int E = experts_;
  losses_ = {};
  for (auto& b : balance_) b.tokens_per_expert.clear();
  if (!training_) return;
  if (balance_[0].coeff > 0 || balance_[1].coeff > 0 || balance_[2].coeff > 0) {
    if (sigmoid_) {  // compute_routing_scores_for_aux_loss: sigmoid normalized over the experts
      aux_scores_ = sigmoid_scores_;
      for (int t = 0; t < rows_; ++t) {
        double* a = &aux_scores_[std::size_t(t) * E];
        const double z = std::accumulate(a, a + E, 0.0) + 1e-20;
        for (int e = 0; e < E; ++e) a[e] /= z;
      }
    }
    double* loss_of[] = {&losses_.load_balancing_loss, &losses_.seq_load_balancing_loss,
                         &losses_.global_load_balancing_loss};
    for (std::size_t i = 0; i < balance_.size(); ++i)
      if (balance_[i].coeff > 0) *loss_of[i] = balance_loss(balance_[i]);
  }
  if (z_coeff_) {
    double sq = 0;
    for (double v : lse_) sq += v * v;
    losses_.z_loss = sq / rows_;
  }
}

void moe_router::reset_global_tokens() {
  global_tokens_.clear();
  global_steps_ = 0;
}

double moe_router::balance_loss(balance_term& b) {
  const int E = experts_, k = topk_;
  const int groups = b.seq_level ? batch_ : 1;  // seq_aux_loss: each sequence of the batch alone
  b.tokens_per_expert.assign(std::size_t(groups) * E, 0.0);
  std::vector<double> score_sums(std::size_t(groups) * E, 0.0);
  for (int t = 0; t < rows_; ++t) {
    const int g = b.seq_level ? t % batch_ : 0;
    for (int j = 0; j < k; ++j) b.tokens_per_expert[std::size_t(g) * E + aux_top_[std::size_t(t) * k + j]] += 1;
    const double* a = aux_scores(t);
    for (int e = 0; e < E; ++e) score_sums[std::size_t(g) * E + e] += a[e];
  }
  // The tokens the other shards of these sequences routed count too (Megatron's reduction over
  // tp_cp_group, or tp_dp_cp_group for global_aux_loss); the scores stay this rank's, so the
  // shards' losses sum to the whole one.
  if (b.ranks) b.ranks->all_reduce_sum(b.tokens_per_expert.data(), b.tokens_per_expert.size());
  if (b.running) {
    // Megatron's fp32 running sum over the global batch's micro-batches and its mean.
    if (global_tokens_.empty()) global_tokens_.assign(std::size_t(E), 0.0);
    ++global_steps_;
    for (int e = 0; e < E; ++e) {
      global_tokens_[e] = static_cast<float>(global_tokens_[e] + b.tokens_per_expert[e]);
      b.tokens_per_expert[e] = static_cast<float>(static_cast<float>(global_tokens_[e]) / static_cast<float>(global_steps_));
    }
  }
  const double n = double(b.seq_level ? seq_ : rows_) * b.num_ranks;
  double sum = 0;
  for (std::size_t i = 0; i < score_sums.size(); ++i) sum += score_sums[i] * b.tokens_per_expert[i];
  return sum * E / (k * n * n) / groups;  // the loss divided by its coefficient
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

void moe_router::add_normalized_sigmoid_gradient(std::vector<double>& dlogits, const std::vector<double>& g) const {
  // a = u / (sum u + eps), u = sigmoid(l): dL/du_f = g_f / Z - sum_e g_e u_e / Z^2.
  const int E = experts_;
  for (int t = 0; t < rows_; ++t) {
    const double* u = &sigmoid_scores_[std::size_t(t) * E];
    const double* gt = &g[std::size_t(t) * E];
    const double z = std::accumulate(u, u + E, 0.0) + 1e-20;
    double dot = 0;
    for (int e = 0; e < E; ++e) dot += gt[e] * u[e];
    for (int e = 0; e < E; ++e)
      dlogits[std::size_t(t) * E + e] += (gt[e] / z - dot / (z * z)) * u[e] * (1 - u[e]);
  }
}

void moe_router::add_aux_loss_gradients(std::vector<double>& dlogits, double scale) const {
  if (!training_) return;
  const int E = experts_, k = topk_;
  // Megatron multiplies each auxiliary loss by the local token count under per-token loss.
  const double unit = scale * (per_token_loss_ ? rows_ : 1.0);
  // Each loss is linear in the scores: their gradients sum into one g[t, e] first.
  std::vector<double> g;
  for (const auto& b : balance_) {
    if (b.tokens_per_expert.empty()) continue;
    const double n = double(b.seq_level ? seq_ : rows_) * b.num_ranks;
    const double groups = b.seq_level ? batch_ : 1;
    const double c = unit * b.coeff * E / (k * n * n) / groups;
    g.resize(std::size_t(rows_) * E, 0.0);
    for (int t = 0; t < rows_; ++t)
      for (int e = 0; e < E; ++e)
        g[std::size_t(t) * E + e] += c * b.tokens_per_expert[std::size_t(b.seq_level ? t % batch_ : 0) * E + e];
  }
  if (!g.empty()) {
    if (sigmoid_)
      add_normalized_sigmoid_gradient(dlogits, g);
    else
      add_softmax_gradient(dlogits, g);
  }
  if (z_coeff_) {
    // z = coeff * mean_t(lse_t^2): dz/dlogits[t, e] = coeff * 2 lse_t softmax[t, e] / rows, with
    // Megatron's coefficient divided by the shards (their means then sum to the whole one's).
    const double c = unit * *z_coeff_ / num_shards_ * 2.0 / rows_;
    for (int t = 0; t < rows_; ++t)
      for (int e = 0; e < E; ++e)
        dlogits[std::size_t(t) * E + e] += c * lse_[t] * softmax_[std::size_t(t) * E + e];
  }
}

}  // namespace mactor::model

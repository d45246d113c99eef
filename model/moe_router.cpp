// Top-k routing, the load-balancing and z losses, and their backward.
#include "model/moe_router.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "kernels/convert.hpp"
#include "kernels/dropout.hpp"
#include "kernels/gemm.hpp"
#include "kernels/tensor_ops.hpp"
#include "model/activation.hpp"
#include "model/host_exchange.hpp"
#include "model/moe_sinkhorn.hpp"

namespace mactor::model {
moe_router::moe_router(parameter_store& store, const std::string& name, const gpt_model_config& c,
                       group* sequence_shards, group* global_batch)
    : weight_(store.add(name + ".weight", {c.moe.num_experts, c.hidden_size}, tp_split::replicated,
                        init_kind::normal, c.init_method_std)),
      experts_(c.moe.num_experts), topk_(c.moe.router_topk), hidden_(c.hidden_size),
      shards_(sequence_shards && sequence_shards->size() > 1 ? sequence_shards : nullptr),
      num_shards_(shards_ ? shards_->size() : 1),
      pre_softmax_(c.moe.router_pre_softmax), per_token_loss_(c.moe.per_token_loss),
      sigmoid_(c.moe.score_function == moe_score_function::sigmoid), groups_(c.moe.router_num_groups),
      group_topk_(c.moe.router_group_topk), scaling_(c.moe.router_topk_scaling_factor),
      balancing_(c.moe.load_balancing),
      balance_{{{false, c.moe.balancing_coeff(moe_load_balancing::aux_loss), {}, shards_, num_shards_},
                 {true, c.moe.balancing_coeff(moe_load_balancing::seq_aux_loss), {}, shards_, num_shards_},
                 {false, c.moe.balancing_coeff(moe_load_balancing::global_aux_loss), {},
                  global_batch && global_batch->size() > 1 ? global_batch : nullptr,
                  global_batch ? global_batch->size() : 1, true}}},
      z_coeff_(c.moe.z_loss_coeff),
      capacity_factor_(c.moe.expert_capacity_factor), drop_by_position_(c.moe.drop_by_position),
      name_(name), bias_name_(name + ".expert_bias"), bias_update_rate_(c.moe.bias_update_rate), router_dtype_(c.moe.router_dtype),
      jitter_eps_(c.moe.input_jitter_eps), force_balance_(c.moe.force_load_balancing) {
  // Megatron's router weight carries the sequence_parallel attribute: each tensor-parallel rank
  // routes its own shard of the tokens, so the gradients are summed over the group.
  store[weight_].sequence_parallel = c.sequence_parallel;
  if (c.moe.enable_expert_bias) expert_bias_.assign(experts_, 0.0f);
  routed_tokens_.assign(experts_, 0.0);
}

void moe_router::count_routed_tokens() {
  for (std::size_t i = 0; i < top_.size(); ++i)
    if (kept_[i]) routed_tokens_[std::size_t(top_[i])] += 1.0;
}

void moe_router::update_expert_bias(std::span<const double> tokens) {
  double mean = 0;
  for (double v : tokens) mean += v;
  mean /= double(experts_);
  for (int e = 0; e < experts_; ++e) {
    const double offset = mean - tokens[std::size_t(e)];
    const float sign = offset > 0 ? 1.0f : (offset < 0 ? -1.0f : 0.0f);
    expert_bias_[std::size_t(e)] += sign * static_cast<float>(bias_update_rate_);
  }
  std::fill(routed_tokens_.begin(), routed_tokens_.end(), 0.0);
}

void moe_router::forward(const parameter_store& store, tensor::const_tensor_view x, int seq,
                         int batch, bool training, std::uint64_t noise_stream) {
  seq_ = seq, batch_ = batch, rows_ = seq * batch, training_ = training;
  if (jitter_eps_) x = apply_jitter(x, noise_stream);
  const auto type = router_dtype_.value_or(x.type);
  auto logits = ensure_activation(logits_tensor_, rows_, experts_, type);
  if (type == x.type) {
    kernels::linear_forward(x, store.value(weight_), logits, rows_, hidden_, experts_);
  } else {
    auto wide_x = ensure_activation(wide_x_, rows_, hidden_, type);
    auto wide_w = ensure_activation(wide_w_, experts_, hidden_, type);
    kernels::convert(wide_x, x);
    kernels::convert(wide_w, store.value(weight_));
    kernels::linear_forward(wide_x, wide_w, logits, rows_, hidden_, experts_);
  }
  if (force_balance_) {
    // RandomSTE: normal draws of the logits' dtype in place of the logits.
    const std::uint64_t stream = kernels::dropout_stream(noise_stream, 0, 1, 0);
    std::vector<double> draws(std::size_t(rows_) * experts_);
    for (std::size_t i = 0; i < draws.size(); ++i) draws[i] = random_logit(stream, i);
    convert_across(logits, tensor::view_of(std::span<const double>(draws)));
  }
  logits_.resize(std::size_t(rows_) * experts_);
  convert_across(tensor::view_of(std::span<double>(logits_)), logits);
  route();
}

namespace {

// torch.topk's selection: the k largest of v[0..n), largest first (ties to the lower index).
void top_k(const double* v, int n, int k, int* out, std::vector<int>& order) {
  order.resize(n);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int a, int b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
  std::copy(order.begin(), order.begin() + k, out);
}

}  // namespace

void moe_router::select(const double* scores, int* top) const {
  const int E = experts_, k = topk_;
  std::vector<int> order;
  if (!group_topk_) return top_k(scores, E, k, top, order);
  // Megatron's group_limited_topk: a group's score is the sum of its top (k / group_topk)
  // scores; the token picks its top group_topk groups, then its top k experts inside them.
  const int per_group = E / groups_, best = k / group_topk_;
  std::vector<double> group_score(groups_), sorted(per_group);
  for (int g = 0; g < groups_; ++g) {
    std::copy(scores + g * per_group, scores + (g + 1) * per_group, sorted.begin());
    std::partial_sort(sorted.begin(), sorted.begin() + best, sorted.end(), std::greater<double>());
    group_score[g] = std::accumulate(sorted.begin(), sorted.begin() + best, 0.0);
  }
  std::vector<int> chosen(group_topk_);
  top_k(group_score.data(), groups_, group_topk_, chosen.data(), order);
  std::vector<double> masked(E, -std::numeric_limits<double>::infinity());
  for (int g : chosen)
    std::copy(scores + g * per_group, scores + (g + 1) * per_group, masked.begin() + g * per_group);
  top_k(masked.data(), E, k, top, order);
}

void moe_router::route() {
  const int E = experts_, k = topk_;
  softmax_.assign(std::size_t(rows_) * E, 0.0);
  sigmoid_scores_.assign(sigmoid_ ? std::size_t(rows_) * E : 0, 0.0);
  lse_.assign(rows_, 0.0);
  top_.assign(std::size_t(rows_) * k, 0);
  aux_top_.assign(std::size_t(rows_) * k, 0);
  probs_.assign(std::size_t(rows_) * k, 0.0);
  topk_softmax_.assign(std::size_t(rows_) * k, 0.0);
  std::vector<int> order;
  for (int t = 0; t < rows_; ++t) {
    const double* l = &logits_[std::size_t(t) * E];
    double* s = &softmax_[std::size_t(t) * E];
    const double m = *std::max_element(l, l + E);
    double sum = 0;
    for (int e = 0; e < E; ++e) sum += (s[e] = std::exp(l[e] - m));
    for (int e = 0; e < E; ++e) s[e] /= sum;
    lse_[t] = m + std::log(sum);
    if (balancing_ == moe_load_balancing::sinkhorn) continue;  // route_sinkhorn() chooses
    int* top = &top_[std::size_t(t) * k];
    double* q = &topk_softmax_[std::size_t(t) * k];
    double* p = &probs_[std::size_t(t) * k];
    // The aux loss's routing map: the top k of the (normalized) scores, monotone in the logits.
    top_k(l, E, k, &aux_top_[std::size_t(t) * k], order);
    if (sigmoid_) {
      double* sg = &sigmoid_scores_[std::size_t(t) * E];
      for (int e = 0; e < E; ++e) sg[e] = 1.0 / (1.0 + std::exp(-l[e]));
      if (expert_bias_.empty()) {
        select(sg, top);
      } else {
        // The bias steers the choice only; the probabilities come from the plain scores.
        biased_.resize(E);
        for (int e = 0; e < E; ++e) biased_[e] = double(float(sg[e]) + expert_bias_[e]);
        select(biased_.data(), top);
      }
      double z = 0;
      for (int j = 0; j < k; ++j) z += (q[j] = sg[top[j]]);
      for (int j = 0; j < k; ++j) p[j] = k > 1 ? q[j] / (z + 1e-20) : q[j];
    } else if (pre_softmax_) {
      select(s, top);
      for (int j = 0; j < k; ++j) p[j] = s[top[j]];
    } else {
      select(l, top);
      const double top_max = l[top[0]];
      double top_sum = 0;
      for (int j = 0; j < k; ++j) top_sum += (q[j] = std::exp(l[top[j]] - top_max));
      for (int j = 0; j < k; ++j) p[j] = q[j] /= top_sum;
    }
    for (int j = 0; j < k; ++j) p[j] *= scaling_.value_or(1.0);
  }
  if (balancing_ == moe_load_balancing::sinkhorn) route_sinkhorn();
  kept_.assign(std::size_t(rows_) * k, 1);
  if (capacity_factor_) drop_tokens();
  aux_losses_forward();
}

void moe_router::drop_tokens() {
  const int E = experts_, k = topk_;
  const auto capacity = std::size_t(std::ceil(double(rows_) * k / E * *capacity_factor_));
  std::vector<std::vector<std::size_t>> routed(E);  // choice indices t * k + j, in token order
  for (std::size_t c = 0; c < top_.size(); ++c) routed[top_[c]].push_back(c);
  for (auto& choices : routed) {
    if (choices.size() <= capacity) continue;
    if (!drop_by_position_)  // the highest probabilities (ties to the earlier token)
      std::stable_sort(choices.begin(), choices.end(), [&](std::size_t a, std::size_t b) { return probs_[a] > probs_[b]; });
    for (std::size_t i = capacity; i < choices.size(); ++i) kept_[choices[i]] = 0;
  }
}

void moe_router::backward(parameter_store& store, const std::vector<double>& dprobs,
                          tensor::const_tensor_view x, tensor::tensor_view dx, double aux_loss_scale) {
  const int E = experts_, k = topk_;
  const double sf = scaling_.value_or(1.0);
  std::vector<double> dlogits(std::size_t(rows_) * E, 0.0);
  if (jitter_eps_) x = jittered_;  // the GEMM's input was x * jitter
  if (balancing_ == moe_load_balancing::sinkhorn) {
    // probs = sigmoid(logits) at the top choice (k = 1), else the full softmax at the top k.
    std::vector<double> g(std::size_t(rows_) * E, 0.0);
    for (int t = 0; t < rows_; ++t)
      for (int j = 0; j < k; ++j) {
        const std::size_t c = std::size_t(t) * k + j, e = std::size_t(top_[c]);
        if (k == 1) dlogits[std::size_t(t) * E + e] += dprobs[c] * probs_[c] * (1 - probs_[c]);
        else g[std::size_t(t) * E + e] = dprobs[c];
      }
    if (k > 1) add_softmax_gradient(dlogits, g);
  } else if (sigmoid_) {
    for (int t = 0; t < rows_; ++t) {
      const double* u = &topk_softmax_[std::size_t(t) * k];  // the top k sigmoid scores
      const double* dp = &dprobs[std::size_t(t) * k];
      double z = 0, dot = 0;
      for (int j = 0; j < k; ++j) z += u[j], dot += dp[j] * sf * u[j];
      z += 1e-20;
      for (int j = 0; j < k; ++j) {
        const double du = k > 1 ? dp[j] * sf / z - dot / (z * z) : dp[j] * sf;
        dlogits[std::size_t(t) * E + top_[std::size_t(t) * k + j]] += du * u[j] * (1 - u[j]);
      }
    }
  } else if (pre_softmax_) {
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
  const auto type = router_dtype_.value_or(x.type);
  auto dl = ensure_activation(dlogits_tensor_, rows_, E, type);
  convert_across(dl, tensor::view_of(std::span<const double>(dlogits)));
  // With jitter, the input gradient goes through the noise: dx += jitter * d(x * jitter).
  const tensor::tensor_view dx_router = jitter_eps_ ? ensure_activation(djittered_, rows_, hidden_, dx.type) : dx;
  if (jitter_eps_) kernels::fill_zero(dx_router);
  if (type == x.type) {
    store.weight_grads().add({dl, x}, [&store, this, E](auto in) {
      kernels::linear_backward_weight(in[0], in[1], store.grad(weight_), rows_, hidden_, E);
    });
    kernels::linear_backward_input(dl, store.value(weight_), dx_router, rows_, hidden_, E, 1.0);
    if (jitter_eps_) add_jittered_input_gradient(dx, dx_router);
    return;
  }
  // A wider router: both gradients in its dtype, then rounded to the weight gradient's and the
  // input's dtypes and added there (autograd's cast back and sum).
  store.weight_grads().add({dl, wide_x_}, [&store, this, E, type](auto in) {
    auto dw = ensure_activation(wide_dw_, E, hidden_, type);
    kernels::fill_zero(dw);
    kernels::linear_backward_weight(in[0], in[1], dw, rows_, hidden_, E);
    auto grad = store.grad(weight_);
    auto dw_narrow = ensure_activation(narrow_, E, hidden_, grad.type);
    kernels::convert(dw_narrow, dw);
    kernels::add(grad, dw_narrow);
  });
  auto wide_dx = ensure_activation(wide_dx_, rows_, hidden_, type);
  kernels::linear_backward_input(dl, wide_w_, wide_dx, rows_, hidden_, E);
  auto dx_narrow = ensure_activation(narrow_, rows_, hidden_, dx.type);
  kernels::convert(dx_narrow, wide_dx);
  kernels::add(elements(dx_router, 0, std::int64_t(rows_) * hidden_), dx_narrow);
  if (jitter_eps_) add_jittered_input_gradient(dx, dx_router);
}

void moe_router::carry(activation_stash& s) {
  s.carry(rows_, seq_, batch_, training_, softmax_, topk_softmax_, sigmoid_scores_, top_, kept_, probs_, lse_,
          wide_x_, wide_w_, jitter_, jittered_);
  for (auto& b : balance_) s.carry(b.tokens_per_expert);
}

void moe_router::route_sinkhorn() {
  const int E = experts_, k = topk_;
  std::vector<float> balanced;
  if (training_) balanced = sinkhorn_balanced(logits_, rows_, E);
  std::vector<double> score(E), key(E);
  std::vector<int> order;
  for (int t = 0; t < rows_; ++t) {
    const std::size_t row = std::size_t(t) * E;
    for (int e = 0; e < E; ++e)
      score[e] = k == 1 ? 1.0 / (1.0 + std::exp(-logits_[row + e])) : softmax_[row + e];
    for (int e = 0; e < E; ++e) key[e] = training_ ? double(balanced[row + e]) : score[e];
    int* top = &top_[std::size_t(t) * k];
    top_k(key.data(), E, k, top, order);
    for (int j = 0; j < k; ++j) probs_[std::size_t(t) * k + j] = score[top[j]];
  }
}

tensor::const_tensor_view moe_router::apply_jitter(tensor::const_tensor_view x, std::uint64_t stream) {
  const std::size_t n = std::size_t(rows_) * hidden_;
  std::vector<double> xs(n);
  convert_across(tensor::view_of(std::span<double>(xs)), elements(x, 0, std::int64_t(n)));
  jitter_.resize(n);
  for (std::size_t i = 0; i < n; ++i) jitter_[i] = input_jitter(stream, i, *jitter_eps_);
  // Megatron draws the noise in the input's dtype and multiplies there.
  auto out = ensure_activation(jittered_, rows_, hidden_, x.type);
  convert_across(out, tensor::view_of(std::span<const double>(jitter_)));
  convert_across(tensor::view_of(std::span<double>(jitter_)), tensor::const_tensor_view(out));
  for (std::size_t i = 0; i < n; ++i) xs[i] *= jitter_[i];
  convert_across(out, tensor::view_of(std::span<const double>(xs)));
  return out;
}

void moe_router::add_jittered_input_gradient(tensor::tensor_view dx, tensor::tensor_view dx_router) {
  const std::size_t n = std::size_t(rows_) * hidden_;
  std::vector<double> g(n);
  convert_across(tensor::view_of(std::span<double>(g)), dx_router);
  for (std::size_t i = 0; i < n; ++i) g[i] *= jitter_[i];
  convert_across(dx_router, tensor::view_of(std::span<const double>(g)));  // dx_router is scratch here
  kernels::add(elements(dx, 0, std::int64_t(n)), dx_router);
}

}  // namespace mactor::model

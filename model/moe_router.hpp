// Megatron-Core's top-k MoE router: logits = x W^T (W: [experts, hidden]), top-k over softmax
// scores (after the top-k, or before it with --moe-router-pre-softmax) or sigmoid scores
// (normalized over the k), optionally group-limited (--moe-router-num-groups/-group-topk), a
// factor, the load-balancing loss (aux_loss or seq_aux_loss) and the z-loss, whose gradients
// enter the logits' gradient scaled as Megatron's MoEAuxLossAutoScaler scales them.
// The routing math runs in double on the host (exact for fp32 and fp64 logits).
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/activation_stash.hpp"
#include "model/gpt_model_config.hpp"
#include "model/group.hpp"
#include "model/parameter.hpp"

namespace mactor::model {

/// The auxiliary losses of one forward as Megatron's tracker records them (divided by their
/// coefficient); absent ones are 0.
struct moe_aux_losses {
  double load_balancing_loss = 0;      // aux_loss
  double seq_load_balancing_loss = 0;  // seq_aux_loss
  double global_load_balancing_loss = 0;  // global_aux_loss
  double z_loss = 0;
};
/// The kinds a MoE model's per-layer loss tracker holds, in this order: load_balancing_loss,
/// seq_load_balancing_loss, global_load_balancing_loss, z_loss.
constexpr int moe_aux_loss_kinds = 4;

class moe_router {
 public:
  /// Registers name.weight [num_experts, hidden] (normal(0, init_method_std), as Megatron).
  /// sequence_shards: the ranks holding the other parts of each micro-batch's sequences (the
  /// context-parallel group): the load-balancing losses sum their tokens per expert over it and
  /// count its tokens (Megatron's tp_cp_group), and the z-loss's coefficient is divided by its size.
  /// global_batch: the ranks whose tokens global_aux_loss counts (Megatron's tp_dp_cp group).
  moe_router(parameter_store& store, const std::string& name, const gpt_model_config& config,
             group* sequence_shards = nullptr, group* global_batch = nullptr);
  /// Megatron's reset_global_aux_loss_tracker: global_aux_loss's running count of tokens per
  /// expert restarts (after every global batch).
  void reset_global_tokens();
  /// Routes x[rows, hidden] (rows in [seq, batch] order). Training adds the auxiliary losses.
  /// With a router dtype, x and the weight are widened to it first. With --moe-input-jitter-eps
  /// x is first multiplied by noise drawn from noise_stream (in training and evaluation alike,
  /// as Megatron's apply_input_jitter, which does not look at self.training). With
  /// --moe-router-force-load-balancing the logits are then replaced by standard normal draws
  /// from a stream derived from noise_stream (Megatron's RandomSTE, in training and evaluation);
  /// the backward passes their gradient to the gating GEMM unchanged (straight through).
  void forward(const parameter_store& store, tensor::const_tensor_view x, int seq, int batch,
               bool training, std::uint64_t noise_stream = 0);
  /// The last forward's jitter factors [rows, hidden] (of x's dtype, widened; empty without).
  const std::vector<double>& jitter() const { return jitter_; }
  /// top()[t * k + j]: the j-th expert of token t, probs() its probability.
  const std::vector<int>& top() const { return top_; }
  const std::vector<double>& probs() const { return probs_; }
  /// The last forward's logits [rows, experts] (of the router's dtype, widened).
  const std::vector<double>& logits() const { return logits_; }
  /// kept()[t * k + j]: whether that choice survived the expert capacity (all without one).
  const std::vector<char>& kept() const { return kept_; }
  int topk() const { return topk_; }
  int num_experts() const { return experts_; }
  const moe_aux_losses& aux_losses() const { return losses_; }

  /// --moe-router-enable-expert-bias: the bias (empty without it), Megatron's router.expert_bias
  /// buffer, saved in checkpoints under name.expert_bias.
  std::vector<float>& expert_bias() { return expert_bias_; }
  const std::string& expert_bias_name() const { return bias_name_; }
  /// The router's module name, e.g. decoder.layers.3.mlp.router.
  const std::string& name() const { return name_; }
  /// Adds the last forward's kept tokens per expert to the global batch's count (Megatron's
  /// local_tokens_per_expert; call once per trained micro-batch, not for a recomputed forward).
  /// The expert bias moves by them; the live inspector shows them.
  void count_routed_tokens();
  /// The global batch's tokens per expert routed by this rank ([experts]); zeroed by
  /// update_expert_bias and reset_routed_tokens.
  std::vector<double>& routed_tokens() { return routed_tokens_; }
  void reset_routed_tokens() { std::fill(routed_tokens_.begin(), routed_tokens_.end(), 0.0); }
  /// Megatron's get_updated_expert_bias from the counts summed over the replicas:
  /// bias_e += rate * sign(mean count - count_e); then the counts restart.
  void update_expert_bias(std::span<const double> tokens_per_expert);
  /// dprobs[t * k + j]: gradient of probs(). Adds the auxiliary losses' gradients (each
  /// scaled by aux_loss_scale, Megatron's main_loss_backward_scale), accumulates W's gradient
  /// and adds the input gradient into dx[rows, hidden].
  void backward(parameter_store& store, const std::vector<double>& dprobs,
                tensor::const_tensor_view x, tensor::tensor_view dx, double aux_loss_scale);
  /// The routing of the last forward that its backward reads (activation_stash.hpp): sizes,
  /// scores, choices, the jitter and each load-balancing term's token counts. What spans
  /// micro-batches stays: the expert bias, the routed-token counts, global_aux_loss's running sum.
  void carry(activation_stash& s);

 private:
  void route();
  /// Megatron's sinkhorn_load_balancing: choices from the Sinkhorn-balanced logits in
  /// training, from the scores in evaluation; probs = sigmoid (k = 1) or the full softmax.
  void route_sinkhorn();
  /// Multiplies x by the jitter into jittered_ (x's dtype); returns the view the router uses.
  tensor::const_tensor_view apply_jitter(tensor::const_tensor_view x, std::uint64_t stream);
  /// dx += jitter * dx_router (the jittered input's gradient); dx_router is overwritten.
  void add_jittered_input_gradient(tensor::tensor_view dx, tensor::tensor_view dx_router);
  /// The k experts of one token from its selection scores (group-limited when configured).
  void select(const double* scores, int* top) const;
  void aux_losses_forward();
  /// Megatron's apply_router_token_dropping: marks the choices past each expert's capacity.
  void drop_tokens();
  /// Token t's scores the aux loss sums: softmax, or the sigmoid normalized over the experts.
  const double* aux_scores(int t) const;
  void add_normalized_sigmoid_gradient(std::vector<double>& dlogits, const std::vector<double>& g) const;
  void add_aux_loss_gradients(std::vector<double>& dlogits, double scale) const;
  /// Adds the gradient of sum_e coeff_e * sum_t scores[t, e] * weight[t, e] through the full
  /// softmax: dlogits[t] += S_t * (g_t - S_t . g_t).
  void add_softmax_gradient(std::vector<double>& dlogits, const std::vector<double>& g) const;

  int weight_, experts_, topk_, hidden_, rows_ = 0, seq_ = 0, batch_ = 0;
  group* shards_;   // sequence_shards (null: none)
  int num_shards_;  // its size, 1 without
  bool pre_softmax_, per_token_loss_, training_ = false;
  bool sigmoid_;
  int groups_, group_topk_;
  std::optional<double> scaling_;
  moe_load_balancing balancing_;
  /// A load-balancing loss of the micro-batch (aux_loss) or of each sequence (seq_aux_loss):
  /// its coefficient (0: off) and the last forward's tokens per expert ([groups, experts]).
  struct balance_term {
    bool seq_level;
    double coeff;
    std::vector<double> tokens_per_expert;
    group* ranks = nullptr;  // whose tokens count with this rank's (null: none)
    int num_ranks = 1;       // its size
    bool running = false;    // global_aux_loss: the counts averaged over the micro-batches so far
  };
  /// aux_loss, seq_aux_loss, global_aux_loss (several with the list form).
  std::array<balance_term, 3> balance_;
  std::vector<double> global_tokens_;  // global_aux_loss: the running sum [experts]
  int global_steps_ = 0;
  /// Fills b's token counts; returns its loss divided by its coefficient.
  double balance_loss(balance_term& b);
  std::optional<double> z_coeff_;
  std::vector<double> logits_;    // [rows, experts]
  std::vector<double> softmax_;   // softmax over all experts [rows, experts]
  std::vector<double> topk_softmax_;  // softmax over the top-k logits, or the top-k sigmoid scores [rows, k]
  std::vector<double> sigmoid_scores_, aux_scores_;  // sigmoid: sigmoid(logits), normalized [rows, experts]
  std::vector<int> aux_top_;  // the aux loss's routing map: the plain top k [rows, k]
  std::vector<int> top_;
  std::vector<char> kept_;
  std::optional<double> capacity_factor_;
  bool drop_by_position_;
  std::vector<double> probs_;
  std::string name_, bias_name_;
  double bias_update_rate_;
  std::vector<float> expert_bias_;     // [experts], fp32 as Megatron keeps it
  std::vector<double> routed_tokens_;  // [experts]: this global batch's kept tokens
  std::vector<double> biased_;         // scratch: one token's scores plus the bias
  std::vector<double> lse_;  // logsumexp of each row (z-loss)
  moe_aux_losses losses_;
  tensor::tensor logits_tensor_, dlogits_tensor_;  // the router's dtype
  std::optional<tensor::dtype> router_dtype_;       // --moe-router-dtype, else the activations'
  tensor::tensor wide_x_, wide_w_, wide_dw_, wide_dx_, narrow_;  // a wider router's copies
  std::optional<double> jitter_eps_;       // --moe-input-jitter-eps
  bool force_balance_;                     // --moe-router-force-load-balancing
  std::vector<double> jitter_;             // the last forward's factors [rows, hidden]
  tensor::tensor jittered_, djittered_;    // x * jitter (saved), the router's input gradient
};

}  // namespace mactor::model

// The local experts of a MoE layer (Megatron-Core's SequentialMLP, or TEGroupedMLP's names under
// --moe-grouped-gemm): expert e is fc1 [ffn (2 ffn gated), hidden], the model's activation,
// the router probability multiplied in after the activation (as Megatron's experts do; onto the
// input instead under --moe-apply-probs-on-input), and
// fc2 [hidden, ffn], without biases. The rows arrive in expert order, tokens_per_expert[e] each.
// With expert parallelism these are this rank's local experts (moe_settings::local_experts).
// Under fp8 each expert's fc1 and fc2 is its own fp8 GEMM, as Transformer Engine's GroupedLinear
// keeps one set of quantizers per GEMM (and SequentialMLP one TE Linear per expert): an expert's
// operands are scaled by its own tokens' amax, never by another expert's. Under a grouped GEMM
// every expert runs at once over the threads, with the loop's numbers. The legacy GroupedMLP
// (--moe-use-legacy-grouped-gemm) computes the same GEMMs, never in fp8 (moe_settings::legacy_grouped_gemm).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/activation_stash.hpp"
#include "model/fp8_linear.hpp"
#include "model/gpt_model_config.hpp"
#include "model/mlp_activation.hpp"
#include "model/parameter.hpp"

namespace mactor::model {

class moe_experts {
 public:
  /// Registers name.local_experts.<e>.linear_fc{1,2}.weight, or with grouped_gemm
  /// name.linear_fc{1,2}.weight<e>, for this rank's experts e (global numbers), as experts.
  moe_experts(parameter_store& store, const std::string& name, const gpt_model_config& config);
  /// out[n, hidden] = fc2(act(fc1(x)) * probs) per expert block; probs [n] of x's dtype.
  void forward(const parameter_store& store, tensor::const_tensor_view x,
               tensor::const_tensor_view probs, const std::vector<std::int64_t>& tokens_per_expert,
               tensor::tensor_view out);
  /// dx[n, hidden] (overwritten), dprobs[n] (overwritten); accumulates the weight gradients.
  void backward(parameter_store& store, tensor::const_tensor_view dout, tensor::const_tensor_view x,
                tensor::tensor_view dx, tensor::tensor_view dprobs);
  void release();
  /// The saved rows of the last forward, into the stash or back out (activation_stash.hpp).
  void carry(activation_stash& s) { s.carry(counts_, probs_, fc1_out_, act_, scaled_, scaled_input_, input_probs_); }

 private:
  static fp8_linear* fp8_of(const std::vector<std::unique_ptr<fp8_linear>>& list, int e) {
    return list.empty() ? nullptr : list[std::size_t(e)].get();
  }

  int experts_, hidden_, ffn_, fc1_width_;
  bool on_input_;  // --moe-apply-probs-on-input
  // --use-fused-weighted-squared-relu in TEGroupedMLP: act * probs in one step (act_ stays empty).
  bool weighted_squared_relu_;
  bool grouped_;  // --moe-grouped-gemm (TEGroupedMLP or the legacy GroupedMLP): every expert at once
  mlp_activation activation_;
  std::vector<int> fc1_, fc2_;  // parameter ids per expert
  std::vector<std::unique_ptr<fp8_linear>> fc1_fp8_, fc2_fp8_;  // per expert under fp8, else empty
  std::vector<std::int64_t> counts_;
  tensor::tensor probs_, fc1_out_, act_, scaled_;  // saved: [n], [n, fc1], [n, ffn], [n, ffn]
  tensor::tensor dscaled_, dact_, dfc1_;           // backward scratch
  // --moe-apply-probs-on-input: probs * x [n, hidden] (saved), the probabilities [n] (probs_
  // then holds ones), and the gradient of probs * x.
  tensor::tensor scaled_input_, input_probs_, dscaled_input_;
};

}  // namespace mactor::model

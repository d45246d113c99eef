// The MoE token dispatcher of one expert-parallel rank (Megatron's allgather and alltoall
// dispatchers reduce to it when --expert-model-parallel-size is 1): the routed (token, choice)
// pairs in expert order, then token order, as Megatron's permute orders them; dispatch gathers
// the tokens' rows into that order, combine sums each token's expert outputs back.
// An expert-parallel dispatcher adds its all-to-all between the permutation and the experts.
#pragma once
#include <cstdint>
#include <vector>

#include "model/activation_stash.hpp"
#include "tensor/tensor.hpp"

namespace mactor::model {

class moe_token_dispatcher {
 public:
  moe_token_dispatcher(int num_experts, int topk) : experts_(num_experts), topk_(topk) {}
  /// Orders the pairs of top[rows * topk] (top[t * topk + j]: token t's j-th expert) that
  /// kept marks (dropped ones go to no expert). `pad_multiple` > 0 (--moe-router-padding-for-fp8):
  /// each expert's rows are then padded to a multiple of it with the first tokens not routed to
  /// it (Megatron's pad_routing_map), rows of no choice (choice -1, probability 0).
  void plan(const std::vector<int>& top, const std::vector<char>& kept, int rows, int pad_multiple = 0);
  /// Rows per expert, in expert order.
  const std::vector<std::int64_t>& tokens_per_expert() const { return tokens_per_expert_; }
  /// The permuted row count (rows * topk less the dropped, plus the padding).
  std::int64_t permuted_rows() const { return std::int64_t(token_.size()); }
  /// Permuted row i holds choice choice_of()[i] = t * topk + j, or -1 for a padding row.
  const std::vector<std::int64_t>& choice_of() const { return choice_; }
  /// out[i] = x[token of row i]; out: [permuted_rows, hidden].
  void dispatch(tensor::const_tensor_view x, tensor::tensor_view out, int hidden) const;
  /// dx = sum over each token's rows of dout (dx is overwritten).
  void dispatch_backward(tensor::const_tensor_view dout, tensor::tensor_view dx, int rows,
                         int hidden) const;
  /// out[t] = sum of expert_out over token t's rows (out is overwritten).
  void combine(tensor::const_tensor_view expert_out, tensor::tensor_view out, int rows,
               int hidden) const;
  /// dexpert_out[i] = dout[token of row i].
  void combine_backward(tensor::const_tensor_view dout, tensor::tensor_view dexpert_out,
                        int hidden) const {
    dispatch(dout, dexpert_out, hidden);
  }
  /// The last plan, into the stash or back out (activation_stash.hpp).
  void carry(activation_stash& s) { s.carry(token_, choice_, tokens_per_expert_); }

 private:
  int experts_, topk_;
  std::vector<std::int64_t> token_, choice_, tokens_per_expert_;
};

}  // namespace mactor::model

// The memory-bound kernels of a transformer layer, as bytes through the accelerator's memory: the
// layer norms, the bias-dropout-add of each residual branch, the MLP's activation function and,
// where the attention backend materializes them, the attention scores (their softmax, dropout and
// the reads of the two batched GEMMs). Flash-style backends never write the scores.
//
// The cost model prices these bytes at the system file's memory bandwidth x memory_efficiency and
// the matmuls at its peak x compute_efficiency, so a model of small hidden size (whose
// element-wise work is a larger share: h per token against the matmuls' h^2, or the s^2 scores
// against s h^2) runs slower per FLOP than a large one, as measured on GPUs. Without
// memory_efficiency in the system file the element-wise work counts inside compute_efficiency.
#pragma once

#include "config/megatron_args.hpp"

namespace mactor::simulate {

/// Which blocks a layer has: a mixer (attention or Mamba) with its norm and residual, the
/// attention's scores, an MLP with its norm and residual (dense, or MoE with the experts'
/// activation over the routed rows).
struct layer_blocks {
  bool mixer = true;
  bool attention = true;
  bool mlp = true;
  bool moe = false;
};

/// One layer's forward element-wise bytes on one rank, per microbatch. The backward moves about
/// twice as much (each kernel reads the forward's input and the incoming gradient, writes one).
struct elementwise_bytes {
  double around_matmuls = 0;    ///< norms, bias-dropout-add, the MLP's activation function
  double attention_scores = 0;  ///< the materialized scores' traffic; 0 with a flash-style backend
  double total() const { return around_matmuls + attention_scores; }
};
elementwise_bytes layer_elementwise_bytes(const config::megatron_args& a, layer_blocks blocks);

/// Whether --attention-backend keeps the scores in memory (Megatron's local DotProductAttention,
/// Transformer Engine's unfused backend) rather than computing them in tiles (flash, fused, auto).
bool attention_scores_materialized(const config::megatron_args& a);

}  // namespace mactor::simulate

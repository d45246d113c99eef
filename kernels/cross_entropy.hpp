// Cross-entropy over a vocabulary shard, in the steps Megatron's vocab-parallel cross-entropy
// takes: the caller combines row maxima (max) and sums (sum) across shards between the steps.
// logits: [n, v] for vocabulary entries [vocab_start, vocab_start + v); labels: [n] global ids.
#pragma once
#include <cstdint>

#include "tensor/tensor.hpp"

namespace mactor::kernels {

/// row_max[n] = max over this shard's logits.
template <typename T>
void cross_entropy_row_max(T* row_max, const T* logits, int n, int v);

/// With row_max the max over all shards: target_logit[n] = the label's logit when the label is
/// in this shard (else 0), then logits[i, j] <- exp(logit - row_max) in place (the backward
/// reuses them) and sum_exp[n] = their sum over this shard.
template <typename T>
void cross_entropy_shard_sums(T* sum_exp, T* target_logit, T* logits, const T* row_max,
                              const std::int32_t* labels, int n, int v, int vocab_start);

/// loss[n] = log(sum_exp) + row_max - target_logit (all three combined over shards).
template <typename T>
void cross_entropy_loss(T* loss, const T* sum_exp, const T* row_max, const T* target_logit, int n);

/// exps (from cross_entropy_shard_sums) <- grad_scale[i] * (softmax - one_hot(label)) in place,
/// sum_exp being the sum over all shards.
template <typename T>
void cross_entropy_backward(T* exps, const T* sum_exp, const std::int32_t* labels,
                            const T* grad_scale, int n, int v, int vocab_start);


// Tensor entry points: dispatch on dtype and device (every tensor the same), sizes checked.
void cross_entropy_row_max(tensor::tensor_view row_max, tensor::const_tensor_view logits, int n,
                           int v);
void cross_entropy_shard_sums(tensor::tensor_view sum_exp, tensor::tensor_view target_logit,
                              tensor::tensor_view logits, tensor::const_tensor_view row_max,
                              const std::int32_t* labels, int n, int v, int vocab_start);
void cross_entropy_loss(tensor::tensor_view loss, tensor::const_tensor_view sum_exp,
                        tensor::const_tensor_view row_max, tensor::const_tensor_view target_logit,
                        int n);
void cross_entropy_backward(tensor::tensor_view exps, tensor::const_tensor_view sum_exp,
                            const std::int32_t* labels, tensor::const_tensor_view grad_scale,
                            int n, int v, int vocab_start);

}  // namespace mactor::kernels

// Vocab-shard cross-entropy on a CUDA device: kernels/cross_entropy.hpp's four steps and
// contract, fp32, tensors and labels in device memory, queued on stream s.
#pragma once
#include <cstdint>

#include "kernels/cuda/launch.hpp"

namespace mactor::kernels::cuda {

/// row_max[n] = max over this shard's logits [n, v].
void cross_entropy_row_max(float* row_max, const float* logits, int n, int v, stream_handle s = nullptr);

/// target_logit[n] = the label's logit when inside this shard (else 0); logits <- exp(logit -
/// row_max) in place; sum_exp[n] = their sum over this shard.
void cross_entropy_shard_sums(float* sum_exp, float* target_logit, float* logits, const float* row_max,
                              const std::int32_t* labels, int n, int v, int vocab_start, stream_handle s = nullptr);

/// loss[n] = log(sum_exp) + row_max - target_logit.
void cross_entropy_loss(float* loss, const float* sum_exp, const float* row_max, const float* target_logit, int n,
                        stream_handle s = nullptr);

/// exps <- grad_scale[i] * (softmax - one_hot(label)) in place.
void cross_entropy_backward(float* exps, const float* sum_exp, const std::int32_t* labels, const float* grad_scale,
                            int n, int v, int vocab_start, stream_handle s = nullptr);

}  // namespace mactor::kernels::cuda

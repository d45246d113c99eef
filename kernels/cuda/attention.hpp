// The attention core on a CUDA device: kernels/attention.hpp's contract (causal, grouped-query,
// sliding window, document mask, sink logits, attention dropout with the CPU kernel's masks,
// context-parallel query runs against a separate key/value buffer), fp32, pointers into device
// memory, queued on stream s. It keeps the CPU kernel's saved state (the probabilities, [batch,
// heads, seq, keys]), so either backend's backward can follow either's forward; it is the exact
// fp32 path that a fused bf16 attention (cuDNN) is held to, not a fast one.
#pragma once
#include <cstdint>

#include "kernels/attention_dims.hpp"
#include "kernels/cuda/launch.hpp"

namespace mactor::kernels::cuda {

/// out [seq, batch, heads, head_dim] and probs from qkv (and kv, or null). dims.document_start,
/// when set, points into device memory.
void attention_forward(float* out, float* probs, const float* qkv, const attention_dims& dims, float scale,
                       float dropout_p, std::uint64_t dropout_stream, const float* sink = nullptr,
                       const float* kv = nullptr, stream_handle s = nullptr);

/// Floats of device scratch attention_backward needs for dims.
std::int64_t attention_backward_scratch(const attention_dims& dims);

/// dqkv's query parts (overwritten) and the key and value parts of dkv (overwritten; null: dqkv);
/// with a sink, dsink[heads] += its gradient when dsink is not null (summed in the CPU kernel's
/// order: rows, then batch). scratch: attention_backward_scratch(dims) floats.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* probs,
                        const attention_dims& dims, float scale, float dropout_p, std::uint64_t dropout_stream,
                        float* scratch, const float* sink = nullptr, float* dsink = nullptr,
                        const float* kv = nullptr, float* dkv = nullptr, stream_handle s = nullptr);

}  // namespace mactor::kernels::cuda

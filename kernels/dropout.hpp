// Dropout with a stateless counter-based generator: element i of stream `seed` is kept when
// hash(seed, i) >= p, so the backward regenerates the mask instead of storing it, and a
// tensor-parallel shard that knows its global element indices draws the same mask as tp=1.
#pragma once
#include <cstdint>

#include "kernels/dropout_hash.hpp"
#include "tensor/tensor.hpp"

namespace mactor::kernels {

/// A stream id for one dropout site (seed, layer, site, step mixed together).
std::uint64_t dropout_stream(std::uint64_t seed, std::uint64_t layer, std::uint64_t site,
                             std::uint64_t step);

/// y[n] = keep(i) ? x[n] / (1 - p) : 0 with keep from (stream, first_index + i); y may alias x.
/// The backward is the same call on the gradient.
template <typename T>
void dropout_apply(T* y, const T* x, std::int64_t n, float p, std::uint64_t stream,
                   std::uint64_t first_index = 0);

/// out[n, w] = residual + dropout(x + bias) (Megatron's bias_dropout_add); bias may be null,
/// out may alias residual or x. Element index for the mask is first_index + the flat index in
/// [n, w] (a sequence-parallel shard passes the index of its first element in the full tensor).
template <typename T>
void bias_dropout_add(T* out, const T* residual, const T* x, const T* bias, int n, int w, float p,
                      std::uint64_t stream, std::uint64_t first_index = 0);


// Tensor entry points: dispatch on dtype and device (every tensor the same), sizes checked;
// bias may be an empty view.
void dropout_apply(tensor::tensor_view y, tensor::const_tensor_view x, std::int64_t n, float p,
                   std::uint64_t stream, std::uint64_t first_index = 0);
void bias_dropout_add(tensor::tensor_view out, tensor::const_tensor_view residual,
                      tensor::const_tensor_view x, tensor::const_tensor_view bias, int n, int w,
                      float p, std::uint64_t stream, std::uint64_t first_index = 0);

}  // namespace mactor::kernels

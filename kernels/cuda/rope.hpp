// Rotary position embedding on a CUDA device: kernels/rope.hpp's rope_apply contract, fp32, x
// and the cos/sin tables in device memory (the tables are made once, by kernels::rope_tables on
// the host, and copied over).
#pragma once
#include <cstdint>

#include "kernels/cuda/launch.hpp"

namespace mactor::kernels::cuda {

/// Rotates, in place, the heads of x viewed as [seq, batch, groups, heads_per_group, head_dim]
/// (a (seq, batch) row every row_stride elements, a group every group_stride); cos, sin:
/// [seq, rot_dim / 2]. inverse rotates by -angle (the backward).
void rope_apply(float* x, const float* cos, const float* sin, int seq, int batch, int groups, int heads_per_group,
                int head_dim, int rot_dim, std::int64_t row_stride, std::int64_t group_stride, bool interleaved,
                bool inverse, stream_handle s = nullptr);

}  // namespace mactor::kernels::cuda

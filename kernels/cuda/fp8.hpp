// fp8 rounding on a CUDA device (kernels/fp8.hpp's round_through_fp8 and
// round_through_fp8_blocks): each value scaled, cast to e4m3 or e5m2 (round to nearest-even,
// saturating, as tensor/float8.hpp casts), widened and multiplied by the inverse scale, with the
// CPU's roundings, so the results are the host's bits. fp32 in device memory, queued on stream s.
#pragma once
#include <cstdint>

#include "kernels/cuda/launch.hpp"

namespace mactor::kernels::cuda {

/// out[i] = fp8(x[i] * scale) * scale_inv over n elements (out may be x).
void round_through_fp8(float* out, const float* x, std::int64_t n, float scale, float scale_inv, bool e5m2,
                       stream_handle s = nullptr);

/// The same per block of block_rows x block_cols of a [rows, cols] matrix, each block's scale
/// from its own amax: a power of two below fp8_max / amax (power_of_two) or MXFP8's E8M0 scale.
void round_through_fp8_blocks(float* out, const float* x, int rows, int cols, int block_rows, int block_cols,
                              bool power_of_two, bool e5m2, stream_handle s = nullptr);

}  // namespace mactor::kernels::cuda

// fp8 quantization as Transformer Engine performs it around its GEMMs: a tensor (or each block
// of it) is multiplied by a scale, cast to e4m3 or e5m2 (round to nearest-even, saturating),
// and the GEMM multiplies the fp8 values by the inverse scale. The CPU backend emulates fp8
// GEMMs by rounding their fp32 operands through fp8 this way and multiplying in fp32.
#pragma once
#include <cstdint>
#include <utility>

#include "tensor/tensor.hpp"

namespace mactor::kernels {

enum class fp8_type { e4m3, e5m2 };

/// The largest finite value: 448 (e4m3) or 57344 (e5m2).
float fp8_max(fp8_type t);

/// The largest |x| over the tensor (fp32, bf16 or fp16); NaN when an element is NaN.
float amax(tensor::const_tensor_view x);

/// q[i] = fp8(x[i] * scale), the bit patterns.
void quantize_fp8(std::uint8_t* q, tensor::const_tensor_view x, float scale, fp8_type t);
/// out[i] = fp8 value of q[i] * scale_inv (out fp32).
void dequantize_fp8(tensor::tensor_view out, const std::uint8_t* q, float scale_inv, fp8_type t);
/// out = fp8(x * scale) * scale_inv, the two above fused: what an fp8 GEMM sees of x (out fp32,
/// x fp32, bf16 or fp16; out may be x when x is fp32).
void round_through_fp8(tensor::tensor_view out, tensor::const_tensor_view x, float scale,
                       float scale_inv, fp8_type t);

/// How a block's scale follows from its amax.
enum class block_scale_rule {
  /// MXFP8: an E8M0 (power-of-two) scale, the block's amax / fp8_max rounded up to a power of two.
  e8m0,
  /// Float8BlockScaling: fp8_max / amax rounded down to a power of two (1 for a zero amax).
  power_of_two,
};

/// {scale, scale_inv} of one block under `rule` (the multiplier before the cast, and the one the
/// GEMM applies after it), exactly as Transformer Engine computes them.
std::pair<float, float> block_scale(float amax, float fp8_max, block_scale_rule rule);

/// {scale, scale_inv} of Transformer Engine's current scaling (compute_scale_from_amax): fp8_max
/// / amax, 1 for a zero, infinite or NaN amax, FLT_MAX where the quotient overflows; rounded
/// down to a power of two when power_of_two.
std::pair<float, float> current_scale(float amax, float fp8_max, bool power_of_two);

/// Block-wise round_through_fp8 of a [rows, cols] row-major matrix: each block of block_rows x
/// block_cols elements (partial at the edges) gets its own scale from its own amax.
/// (1, 32) is MXFP8's row-wise layout, (32, 1) its column-wise one, (1, 128) and (128, 128)
/// Float8BlockScaling's activation and weight tiles.
void round_through_fp8_blocks(tensor::tensor_view out, tensor::const_tensor_view x, int rows,
                              int cols, int block_rows, int block_cols, block_scale_rule rule,
                              fp8_type t);

}  // namespace mactor::kernels

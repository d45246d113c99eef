// Token permutation for mixture-of-experts dispatch: rows gathered into expert order and
// scatter-added back, the per-row scaling by router probabilities and its gradient (row dots).
#pragma once
#include <cstdint>
#include <span>

#include "tensor/tensor.hpp"

namespace mactor::kernels {

/// out[i, :] = in[rows[i], :] for every i (out: [rows.size(), w]).
void gather_rows(tensor::tensor_view out, tensor::const_tensor_view in,
                 std::span<const std::int64_t> rows, int w);
/// out[rows[i], :] += in[i, :] for every i, in order of i (out is not cleared first).
void scatter_add_rows(tensor::tensor_view out, tensor::const_tensor_view in,
                      std::span<const std::int64_t> rows, int w);
/// out[i, :] = in[i, :] * scale[i] for i < n (out may be in).
void scale_rows(tensor::tensor_view out, tensor::const_tensor_view in,
                tensor::const_tensor_view scale, std::int64_t n, int w);
/// out[i] = sum_j a[i, j] * b[i, j] for i < n.
void row_dots(tensor::tensor_view out, tensor::const_tensor_view a, tensor::const_tensor_view b,
              std::int64_t n, int w);

}  // namespace mactor::kernels

// Blocks of columns between a layer's [seq, batch] rows (as every mactor layer orders them) and a
// scan's [batch, seq] rows (mamba_ssm's [b, l, ...] layout), in any dtype: the Mamba mixer's data
// movement. The plain structs are apart from the entry point so that device code can read them.
#pragma once
#include "tensor/tensor.hpp"

namespace mactor::kernels {

enum class row_order {
  seq_batch,  // row = t * batch + b (Megatron's [s, b, h] activations)
  batch_seq,  // row = b * seq + t (mamba_ssm's [b, l, ...] layout)
};

/// One side of a column-block copy: a [seq * batch, width] matrix, its row order, and the
/// first column of the block.
struct column_block {
  row_order order;
  int width;
  int first_column;
};

/// dst[row', to.first_column + j] = src[row, from.first_column + j] for j < columns, each row
/// moved between the two orders; both of one dtype, on one device.
void copy_columns(tensor::tensor_view dst, column_block to, tensor::const_tensor_view src, column_block from,
                  int columns, int seq, int batch);

}  // namespace mactor::kernels

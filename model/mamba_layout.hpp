// The Mamba mixer's data movement: blocks of columns between the layer's [seq, batch] rows (as
// every mactor layer orders them) and the scan's [batch, seq] rows, in any dtype, on the host.
#pragma once
#include "tensor/tensor.hpp"

namespace mactor::model {

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

/// dst[row', dst.first_column + j] = src[row, src.first_column + j] for j < columns, each row
/// moved between the two orders; both of one dtype.
void copy_columns(tensor::tensor_view dst, column_block to, tensor::const_tensor_view src,
                  column_block from, int columns, int seq, int batch);

}  // namespace mactor::model

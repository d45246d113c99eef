// The Mamba mixer's data movement: blocks of columns between the layer's [seq, batch] rows and
// the scan's [batch, seq] rows (kernels/column_copy.hpp, on the host or a device).
#pragma once
#include "kernels/column_copy.hpp"

namespace mactor::model {

using kernels::column_block;
using kernels::copy_columns;
using kernels::row_order;

}  // namespace mactor::model

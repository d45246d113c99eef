// Column-block copies between [seq, batch] and [batch, seq] row orders, and the entry point's
// checks (a device's copies go to its backend).
#include "kernels/column_copy.hpp"

#include <cstdint>
#include <cstring>

#include "kernels/device_kernels.hpp"

namespace mactor::kernels {

namespace {

std::int64_t row_of(row_order order, int t, int b, int seq, int batch) {
  return order == row_order::seq_batch ? std::int64_t(t) * batch + b : std::int64_t(b) * seq + t;
}

}  // namespace

void copy_columns(tensor::tensor_view dst, column_block to, tensor::const_tensor_view src,
                  column_block from, int columns, int seq, int batch) {
  if (dst.type != src.type || dst.where != src.where)
    throw tensor::tensor_error("copy_columns: both views must be of one dtype on one device");
  const std::int64_t rows = std::int64_t(seq) * batch;
  if (dst.numel() < rows * to.width || src.numel() < rows * from.width ||
      to.first_column + columns > to.width || from.first_column + columns > from.width)
    throw tensor::tensor_error("copy_columns: the column block does not fit its matrices");
  if (on_device(dst)) return device_kernels_for("copy_columns", dst).copy_columns(dst, to, src, from, columns, seq, batch);
  const std::size_t elem = tensor::size_of(dst.type), bytes = std::size_t(columns) * elem;
  auto* out = static_cast<char*>(dst.data);
  const auto* in = static_cast<const char*>(src.data);
#pragma omp parallel for schedule(static) if (rows * columns > 65536)
  for (std::int64_t r = 0; r < rows; ++r) {
    const int t = int(r / batch), b = int(r % batch);  // r walks [seq, batch] order
    const std::int64_t d = row_of(to.order, t, b, seq, batch);
    const std::int64_t s = row_of(from.order, t, b, seq, batch);
    std::memcpy(out + (d * to.width + to.first_column) * elem,
                in + (s * from.width + from.first_column) * elem, bytes);
  }
}

}  // namespace mactor::kernels

// 16-bit buffers widened to fp32 around the data plane's collectives (see the header).
#include "training/half_precision_collectives.hpp"

#include "kernels/convert.hpp"

namespace mactor::training {
namespace {

tensor::tensor wide_copy(tensor::const_tensor_view v) {
  tensor::tensor wide({v.numel()}, tensor::dtype::float32, tensor::memory_kind::communication);
  kernels::convert(wide, v);
  return wide;
}

}  // namespace

void all_reduce_in(comm::communicator& group, tensor::tensor_view data) {
  if (!tensor::is_half_precision(data.type)) return group.all_reduce(data);
  auto wide = wide_copy(data);
  group.all_reduce(wide.view());
  kernels::convert(data, wide);
}

void reduce_scatter_in(comm::communicator& group, tensor::const_tensor_view in, tensor::tensor_view out) {
  if (!tensor::is_half_precision(out.type)) return group.reduce_scatter(in, out);
  auto wide_in = wide_copy(in);
  tensor::tensor wide_out({out.numel()}, tensor::dtype::float32, tensor::memory_kind::communication);
  group.reduce_scatter(wide_in.view(), wide_out.view());
  kernels::convert(out, wide_out);
}

}  // namespace mactor::training

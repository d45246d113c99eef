// Conversions and uploads across the host boundary.
#include "model/host_exchange.hpp"

#include "kernels/convert.hpp"
#include "tensor/default_device.hpp"

namespace mactor::model {

void convert_across(tensor::tensor_view dst, tensor::const_tensor_view src) {
  if (dst.where == src.where) return kernels::convert(dst, src);
  if (src.where == tensor::cpu) {  // convert on the host, then upload in dst's dtype
    tensor::tensor staged(dst.shape, dst.type, tensor::memory_kind::communication);
    kernels::convert(staged, src);
    return tensor::copy_between(dst, staged);
  }
  // download in src's dtype, then convert on the host
  tensor::tensor staged(src.shape, src.type, tensor::memory_kind::communication);
  tensor::copy_between(staged, src);
  kernels::convert(dst, staged);
}

tensor::index_array ints_on_model_device(const std::vector<std::int32_t>& host) {
  const auto where = tensor::default_device();
  return where == tensor::cpu ? tensor::index_array() : tensor::index_array(host, where);
}

}  // namespace mactor::model

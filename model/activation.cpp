// Activation buffers: allocate on a change of size or dtype, reuse otherwise.
#include "model/activation.hpp"

#include <cstddef>
#include <string>

#include "tensor/default_device.hpp"

namespace mactor::model {

tensor::tensor_view ensure_activation(tensor::tensor& buffer, std::int64_t rows, std::int64_t cols,
                                      tensor::dtype type) {
  const auto where = tensor::default_device();
  if (!buffer.defined() || buffer.numel() != rows * cols || buffer.type() != type || buffer.where() != where)
    buffer = tensor::tensor({rows, cols}, type, tensor::memory_kind::activations, where);
  else if (buffer.shape() != tensor::shape_type{rows, cols})
    buffer.reshape({rows, cols});
  return buffer.view();
}

namespace {
void check_range(const tensor::shape_type& shape, std::int64_t begin, std::int64_t count) {
  if (begin < 0 || count < 0 || begin + count > tensor::numel_of(shape))
    throw tensor::tensor_error("elements [" + std::to_string(begin) + ", " +
                               std::to_string(begin + count) + ") of a tensor of shape " +
                               tensor::to_string(shape));
}
}  // namespace

tensor::tensor_view elements(const tensor::tensor_view& v, std::int64_t begin, std::int64_t count) {
  check_range(v.shape, begin, count);
  return {static_cast<std::byte*>(v.data) + begin * std::int64_t(tensor::size_of(v.type)),
          {count}, v.type, v.where};
}

tensor::const_tensor_view elements(const tensor::const_tensor_view& v, std::int64_t begin,
                                   std::int64_t count) {
  check_range(v.shape, begin, count);
  return {static_cast<const std::byte*>(v.data) + begin * std::int64_t(tensor::size_of(v.type)),
          {count}, v.type, v.where};
}

}  // namespace mactor::model

// The buffers a layer keeps between its forward and backward (and its scratch), as tensors of
// the model's dtype counted as activations in the memory ledger.
#pragma once
#include <cstdint>

#include "tensor/tensor.hpp"

namespace mactor::model {

/// `buffer` as a [rows, cols] tensor of `type` on the thread's default device
/// (tensor/default_device.hpp): reallocated (zero-filled) when its element count, dtype or device differs, otherwise reshaped with its elements kept (as std::vector::resize
/// keeps them). Returns a view of it.
tensor::tensor_view ensure_activation(tensor::tensor& buffer, std::int64_t rows, std::int64_t cols,
                                      tensor::dtype type);

/// Elements [begin, begin + count) of v, in row-major order, as a 1-d view (whatever v's shape);
/// throws tensor::tensor_error when v holds fewer.
tensor::tensor_view elements(const tensor::tensor_view& v, std::int64_t begin, std::int64_t count);
tensor::const_tensor_view elements(const tensor::const_tensor_view& v, std::int64_t begin,
                                   std::int64_t count);

}  // namespace mactor::model

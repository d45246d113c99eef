// Copies between mactor tensors on the host and on CUDA devices.
#pragma once

#include "tensor/cuda/stream.hpp"
#include "tensor/tensor.hpp"

namespace mactor::cuda {

/// Queues dst <- src on stream s (host<->device, device<->device); dtype and element count must
/// match, else tensor::tensor_error names both. Host memory that is not pinned makes the copy
/// synchronous with the host, as cudaMemcpyAsync does.
void copy(tensor::tensor_view dst, tensor::const_tensor_view src, stream_handle s = nullptr);

/// Fills a device view with zero bytes on stream s.
void zero(tensor::tensor_view dst, stream_handle s = nullptr);

}  // namespace mactor::cuda

// Copies between mactor tensors on the host and on CUDA devices.
#pragma once

#include "tensor/cuda/device_allocator.hpp"
#include "tensor/cuda/stream.hpp"
#include "tensor/tensor.hpp"

namespace mactor::cuda {

/// Queues dst <- src on stream s (host<->device, device<->device); dtype and element count must
/// match, else tensor::tensor_error names both. Host memory that is not pinned makes the copy
/// synchronous with the host, as cudaMemcpyAsync does.
void copy(tensor::tensor_view dst, tensor::const_tensor_view src, stream_handle s = nullptr);

/// A copy of `host` on device `index` (same shape and dtype); waits for the copy.
device_buffer to_device(tensor::const_tensor_view host, int index = 0, stream_handle s = nullptr);

/// A host tensor of memory kind `kind` holding the elements of the device view `device`; waits
/// for the copy.
tensor::tensor to_host(tensor::const_tensor_view device, tensor::memory_kind kind, stream_handle s = nullptr);

/// Fills a device view with zero bytes on stream s.
void zero(tensor::tensor_view dst, stream_handle s = nullptr);

}  // namespace mactor::cuda

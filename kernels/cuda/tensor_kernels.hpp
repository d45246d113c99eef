// The CUDA backend behind the kernels' tensor entry points (kernels/device_kernels.hpp): views on
// a CUDA device go to the kernels of kernels/cuda/, queued on the calling thread's current stream
// (tensor/cuda/current_stream.hpp). fp32 throughout (the linears also bf16); any other dtype, or a
// split norm backward (dx or dgamma alone), is an unsupported_kernel error naming it.
#pragma once

namespace mactor::kernels::cuda {

/// Makes mactor tensors on CUDA devices allocatable (mactor::cuda::enable_device_tensors) and
/// routes the entry points' CUDA views here; idempotent. A program with the GPU backend calls it
/// once at start-up.
void enable_cuda_backend();

}  // namespace mactor::kernels::cuda

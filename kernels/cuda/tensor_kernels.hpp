// The CUDA backend behind the kernels' tensor entry points (kernels/device_kernels.hpp): views on
// a CUDA device go to the kernels of kernels/cuda/, queued on the calling thread's current stream
// (tensor/cuda/current_stream.hpp). The kernels compute in fp32: bf16 and fp16 views are widened
// into scratch and outputs rounded back once (kernels/cuda/device_stage.hpp), as the CPU kernels
// stage them; linears with bf16 operands go to cuBLASLt's bf16 GEMM (bf16 or fp32 out). fp8
// views are an unsupported_kernel error naming the kernel.
#pragma once

namespace mactor::kernels::cuda {

/// Makes mactor tensors on CUDA devices allocatable (mactor::cuda::enable_device_tensors) and
/// routes the entry points' CUDA views here; idempotent. A program with the GPU backend calls it
/// once at start-up.
void enable_cuda_backend();

}  // namespace mactor::kernels::cuda

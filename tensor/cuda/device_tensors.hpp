// mactor tensors in CUDA device memory: after enable_device_tensors(), tensor(shape, type, kind,
// {cuda, i}) takes its bytes from device i's caching allocator (tensor/cuda/device_allocator.hpp),
// zeroed, and gives them back when it dies. Zeroing and copying run on the thread's current stream
// and are done when they return. Blocks go back to the cache at once, so a block freed while a
// kernel on another stream still reads it could be handed out again: device tensors assume one
// compute stream per device, as one pipeline stage per GPU has.
#pragma once

namespace mactor::cuda {

/// Registers CUDA device memory with the tensor layer (tensor/device_memory.hpp); idempotent.
void enable_device_tensors();

}  // namespace mactor::cuda

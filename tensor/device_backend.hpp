// A device backend loaded at run time. Programs such as pretrain_gpt do not link the CUDA runtime
// (loading it costs every process start about 0.15 s, and most runs stay on the host): when a
// run asks for a CUDA device, the backend module libmactor_cuda_backend.so, built beside the
// program, is loaded and registers its memory and kernels into the program's own registries
// (the program exports them: ENABLE_EXPORTS). A program linked with a backend, or a test with
// its pseudo-device, has registered already and loads nothing.
#pragma once

#include "tensor/dtype.hpp"

namespace mactor::tensor {

/// Makes sure tensors can live on `where` (nothing to do for the host): unless memory for its
/// device type is registered already, loads the backend module from the directory of the
/// running program and lets it register for device `where.index`. Throws tensor_error naming
/// the device, the module and the fix when the module is missing or the device is not there.
void require_device_backend(device where);

}  // namespace mactor::tensor

// The device a thread's new model tensors go to, as PyTorch's `with torch.device("cuda"):` sets
// the default device of its factory functions. The model's activation buffers, parameters and
// tables are allocated on default_device(); whoever runs a model on a device (a pipeline stage
// on its GPU, a test on its pseudo-device) holds a default_device_scope around the calls.
#pragma once

#include "tensor/dtype.hpp"

namespace mactor::tensor {

/// This thread's default device: the host unless a default_device_scope is open.
device default_device();

/// Sets this thread's default device until it closes (then the previous one is back).
class default_device_scope {
 public:
  explicit default_device_scope(device where);
  ~default_device_scope();
  default_device_scope(const default_device_scope&) = delete;
  default_device_scope& operator=(const default_device_scope&) = delete;

 private:
  device previous_;
};

}  // namespace mactor::tensor

// The stream a thread's device work goes on: the tensor entry points of the kernels queue on it
// (as PyTorch's current stream). A stage sets its compute stream for the scope of its work;
// without a scope it is the device's default stream.
#pragma once

#include "tensor/cuda/stream.hpp"

namespace mactor::cuda {

/// The calling thread's current stream (nullptr: the default stream).
stream_handle current_stream();

/// Makes `s` the calling thread's current stream until the scope ends.
class stream_scope {
 public:
  explicit stream_scope(stream_handle s);
  ~stream_scope();
  stream_scope(const stream_scope&) = delete;
  stream_scope& operator=(const stream_scope&) = delete;

 private:
  stream_handle previous_;
};

}  // namespace mactor::cuda

// What the model's host-side code exchanges with tensors on the model's device: the MoE router
// routes on the host (its top-k and its losses in double, as the torch reference computes them),
// so its logits come down and its probabilities and logit gradients go up; token ids and labels
// go up for the kernels that read them. On the host both are plain conversions and pointers.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/tensor.hpp"
#include "tensor/transfer.hpp"

namespace mactor::model {

/// dst <- src in dst's dtype with kernels::convert's rounding, where one of them may be on the
/// host and the other on a device (the conversion runs on the host, the bytes cross as they are).
void convert_across(tensor::tensor_view dst, tensor::const_tensor_view src);

/// `host`'s integers uploaded to the thread's default device for its kernels; empty on the host,
/// where the kernels read the vector itself.
tensor::index_array ints_on_model_device(const std::vector<std::int32_t>& host);
/// The copy of `host` a kernel reads: `uploaded` (from ints_on_model_device), or on the host the
/// vector's own elements.
inline const std::int32_t* ints_for_kernels(const std::vector<std::int32_t>& host, const tensor::index_array& uploaded) {
  return uploaded.empty() ? host.data() : uploaded.data();
}

}  // namespace mactor::model

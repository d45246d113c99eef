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

/// `host`'s integers as a kernel on the thread's default device reads them: the vector's own
/// elements on the host; on a device a copy uploaded into `kept`, which must outlive the reads.
const std::int32_t* ints_for_kernels(const std::vector<std::int32_t>& host, tensor::index_array& kept);

}  // namespace mactor::model

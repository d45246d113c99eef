// Collectives on gradient buffers of any dtype. The data plane reduces fp32 and fp64: a 16-bit
// buffer (--grad-reduce-in-bf16) is widened, summed in fp32 and rounded back once.
#pragma once

#include "comm/communicator.hpp"
#include "tensor/tensor.hpp"

namespace mactor::training {

/// data = the sum of every member's data.
void all_reduce_in(comm::communicator& group, tensor::tensor_view data);
/// out = this member's slice of the sum of every member's `in`.
void reduce_scatter_in(comm::communicator& group, tensor::const_tensor_view in, tensor::tensor_view out);

}  // namespace mactor::training

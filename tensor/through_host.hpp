// For code that moves host memory (the collectives' transports) handed tensors on a device: the
// work runs on host copies, and what it wrote goes back where it came from. A transport that
// reaches device memory itself (NCCL) needs none of this.
#pragma once

#include "tensor/transfer.hpp"

namespace mactor::tensor {

/// work(host data) on a host copy of data, then the copy back into data.
template <class Work>
void through_host(tensor_view data, Work work) {
  tensor host = copy_to(data, cpu, memory_kind::communication);
  work(host.view());
  copy_between(data, host);
}

/// work(host in, host out) on host copies of in and out, then out's copy back into out. out's
/// elements go down first only with keep_out (work writes part of it).
template <class Work>
void through_host(const_tensor_view in, tensor_view out, bool keep_out, Work work) {
  const tensor host_in = copy_to(in, cpu, memory_kind::communication);
  tensor host_out = keep_out ? copy_to(out, cpu, memory_kind::communication)
                             : tensor(out.shape, out.type, memory_kind::communication);
  work(host_in.view(), host_out.view());
  copy_between(out, host_out);
}

}  // namespace mactor::tensor

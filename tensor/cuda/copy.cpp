// Host<->device copies of tensor views through cudaMemcpyAsync.
#include "tensor/cuda/copy.hpp"

#include <cuda_runtime_api.h>

#include <string>

#include "tensor/cuda/device.hpp"

namespace mactor::cuda {

namespace {

cudaMemcpyKind kind_of(tensor::device dst, tensor::device src) {
  const bool dst_gpu = dst.type == tensor::device_type::cuda;
  const bool src_gpu = src.type == tensor::device_type::cuda;
  if (dst_gpu && src_gpu) return cudaMemcpyDeviceToDevice;
  if (dst_gpu) return cudaMemcpyHostToDevice;
  if (src_gpu) return cudaMemcpyDeviceToHost;
  return cudaMemcpyHostToHost;
}

}  // namespace

void copy(tensor::tensor_view dst, tensor::const_tensor_view src, stream_handle s) {
  if (dst.type != src.type || dst.numel() != src.numel())
    throw tensor::tensor_error("cuda::copy: a " + std::string(tensor::short_name(src.type)) + " tensor of shape " +
                               tensor::to_string(src.shape) + " into a " + std::string(tensor::short_name(dst.type)) +
                               " tensor of shape " + tensor::to_string(dst.shape));
  if (dst.nbytes() == 0) return;
  detail::check(cudaMemcpyAsync(dst.data, src.data, dst.nbytes(), kind_of(dst.where, src.where), s),
                "cudaMemcpyAsync");
}

device_buffer to_device(tensor::const_tensor_view host, int index, stream_handle s) {
  device_buffer d(host.shape, host.type, index);
  copy(d, host, s);
  detail::check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  return d;
}

tensor::tensor to_host(tensor::const_tensor_view device, tensor::memory_kind kind, stream_handle s) {
  tensor::tensor t(device.shape, device.type, kind);
  copy(t.view(), device, s);
  detail::check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  return t;
}

void zero(tensor::tensor_view dst, stream_handle s) {
  if (dst.where.type != tensor::device_type::cuda)
    throw tensor::tensor_error("cuda::zero: a tensor on " + tensor::to_string(dst.where) + ", not a CUDA device");
  detail::check(cudaMemsetAsync(dst.data, 0, dst.nbytes(), s), "cudaMemsetAsync");
}

}  // namespace mactor::cuda

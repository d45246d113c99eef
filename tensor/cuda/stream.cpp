// Streams and events over the CUDA runtime.
#include "tensor/cuda/stream.hpp"

#include <cuda_runtime_api.h>

#include <utility>

#include "tensor/cuda/device.hpp"

namespace mactor::cuda {

stream::stream() { detail::check(cudaStreamCreateWithFlags(&handle_, cudaStreamNonBlocking), "cudaStreamCreate"); }

stream::~stream() {
  if (handle_) cudaStreamDestroy(handle_);
}

stream& stream::operator=(stream&& other) noexcept {
  std::swap(handle_, other.handle_);
  return *this;
}

void stream::synchronize() const { detail::check(cudaStreamSynchronize(handle_), "cudaStreamSynchronize"); }

event::event() { detail::check(cudaEventCreateWithFlags(&handle_, cudaEventDisableTiming), "cudaEventCreate"); }

event::~event() {
  if (handle_) cudaEventDestroy(handle_);
}

event& event::operator=(event&& other) noexcept {
  std::swap(handle_, other.handle_);
  return *this;
}

void event::record(stream_handle s) { detail::check(cudaEventRecord(handle_, s), "cudaEventRecord"); }

bool event::ready() const {
  const cudaError_t err = cudaEventQuery(handle_);
  if (err == cudaErrorNotReady) return false;
  detail::check(err, "cudaEventQuery");
  return true;
}

void event::make_wait(stream_handle s) const {
  detail::check(cudaStreamWaitEvent(s, handle_, 0), "cudaStreamWaitEvent");
}

void event::synchronize() const { detail::check(cudaEventSynchronize(handle_), "cudaEventSynchronize"); }

}  // namespace mactor::cuda

// A strict stand-in for a GPU, so that CI (which has none) catches what a model port to a device
// misses. Installed as device_type::cuda, it keeps device tensors in a host arena that the host
// cannot touch (PROT_NONE) except while one of its kernels or memory functions runs, and its
// kernels check that every view and pointer they get lies in a live block of that arena before
// they run the CPU kernels on it. So a host read or write of device memory outside a kernel is a
// SIGSEGV reported with its address, and a host buffer handed to a device kernel is an error
// naming the kernel. Results are the CPU kernels' bits: a model on the pseudo-device must give
// exactly what it gives on the host.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.hpp"

namespace mactor::test {

class pseudo_device {
 public:
  /// Registers the pseudo-device's memory and kernels for device_type::cuda (one at a time).
  pseudo_device();
  /// Unregisters the kernels (device tensors must be gone by then).
  ~pseudo_device();
  pseudo_device(const pseudo_device&) = delete;
  pseudo_device& operator=(const pseudo_device&) = delete;

  static constexpr tensor::device where{tensor::device_type::cuda, 0};
  /// Kernel calls so far.
  std::int64_t kernel_calls() const;
  /// Bytes in live blocks now.
  std::size_t live_bytes() const;
};

}  // namespace mactor::test

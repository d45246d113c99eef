// How a tensor reaches a device's memory. The tensor layer knows no CUDA: a device backend
// (tensor/cuda/device_tensors.hpp) registers these functions for its device type, and
// tensor(shape, type, kind, device) then allocates, zeroes, copies and frees through them.
// Without a registration a tensor on that device is an error naming the device and the fix.
#pragma once

#include <cstddef>

#include "tensor/caching_allocator.hpp"
#include "tensor/dtype.hpp"

namespace mactor::tensor {

struct device_memory {
  /// `bytes` of device `index`'s memory; throws when there are none.
  void* (*allocate)(int index, std::size_t bytes);
  /// Gives back a block of allocate().
  void (*release)(int index, void* data) noexcept;
  /// Sets `bytes` bytes to zero; done when it returns.
  void (*fill_zero)(int index, void* data, std::size_t bytes);
  /// Copies between two blocks of device `index`; done when it returns.
  void (*copy)(int index, void* dst, const void* src, std::size_t bytes);
  /// Copies `bytes` of host memory into device `index`'s; done when it returns.
  void (*upload)(int index, void* dst, const void* host_src, std::size_t bytes);
  /// Copies `bytes` of device `index`'s memory into the host's; done when it returns.
  void (*download)(int index, void* host_dst, const void* src, std::size_t bytes);
  /// Device `index`'s allocated and reserved bytes and their peaks (torch.cuda's
  /// memory_allocated, max_memory_allocated, memory_reserved, max_memory_reserved).
  allocator_stats (*stats)(int index) = nullptr;
};

/// Installs `memory` for tensors on devices of `type` (not cpu); a later call replaces it.
void register_device_memory(device_type type, const device_memory& memory);

/// Whether memory for devices of `type` is registered (always, for the host).
bool has_device_memory(device_type type);

/// The registered functions for `where`'s device type; throws tensor_error naming the device
/// when none are registered.
const device_memory& memory_of(device where);

}  // namespace mactor::tensor

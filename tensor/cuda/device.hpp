// CUDA devices: how many there are, which one a thread uses, and the error type every CUDA call
// of mactor throws. No CUDA header leaks from here: callers above the tensor layer stay plain C++.
#pragma once

#include <stdexcept>
#include <string>

namespace mactor::cuda {

/// A failed CUDA runtime or library call: names the call and CUDA's message.
class cuda_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The number of usable CUDA devices: 0 when there is no driver or no device (any error from
/// cudaGetDeviceCount counts as none; without a driver it reports cudaErrorInsufficientDriver).
int device_count();

/// Why device_count() is 0 ("" when a device is there), e.g. "cudaGetDeviceCount: CUDA driver
/// version is insufficient for CUDA runtime version (35)".
std::string no_device_reason();

/// Makes `index` the calling thread's current device; throws cuda_error.
void set_device(int index);

/// "NVIDIA H200 (sm_90, 139 GiB)" for device `index`.
std::string describe_device(int index);

namespace detail {
/// Throws cuda_error("<what>: <CUDA's message> (<code>)") unless code is 0 (cudaSuccess).
void check(int code, const char* what);
}  // namespace detail

}  // namespace mactor::cuda

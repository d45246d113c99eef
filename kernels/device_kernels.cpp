// The registry of device kernel backends (one slot per device type).
#include "kernels/device_kernels.hpp"

#include <array>
#include <atomic>
#include <stdexcept>

#include "kernels/dispatch.hpp"

namespace mactor::kernels {

namespace {
// Written once at start-up, before any device view reaches a kernel.
std::array<std::atomic<device_kernels*>, 2> registered{};
}  // namespace

void register_device_kernels(tensor::device_type type, device_kernels* kernels) {
  if (type == tensor::device_type::cpu) throw std::invalid_argument("register_device_kernels: the CPU kernels are built in");
  registered[std::size_t(type)].store(kernels);
}

device_kernels& device_kernels_for(const char* kernel, const tensor::const_tensor_view& v) {
  auto* kernels = registered[std::size_t(v.where.type)].load();
  if (!kernels) throw unsupported_kernel(kernel, v.type, v.where);
  return *kernels;
}

}  // namespace mactor::kernels

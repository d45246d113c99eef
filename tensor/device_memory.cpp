// The registry of device memory functions (one slot per device type).
#include "tensor/device_memory.hpp"

#include <array>
#include <atomic>
#include <stdexcept>
#include <string>

#include "tensor/tensor.hpp"

namespace mactor::tensor {

namespace {
// Written once at start-up (before tensors on the device exist), read by every allocation.
std::array<std::atomic<const device_memory*>, 2> registered{};
}  // namespace

void register_device_memory(device_type type, const device_memory& memory) {
  if (type == device_type::cpu) throw std::invalid_argument("register_device_memory: the host's memory is built in");
  registered[std::size_t(type)].store(new device_memory(memory));  // lives until exit
}

bool has_device_memory(device_type type) {
  return type == device_type::cpu || registered[std::size_t(type)].load() != nullptr;
}

const device_memory& memory_of(device where) {
  const auto* memory = registered[std::size_t(where.type)].load();
  if (!memory)
    throw tensor_error("a tensor on " + to_string(where) +
                       ": this program has no memory for that device (a build without the GPU backend, or a "
                       "program that did not call mactor::cuda::enable_device_tensors())");
  return *memory;
}

}  // namespace mactor::tensor

// Loading the backend module of a device type with dlopen.
#include "tensor/device_backend.hpp"

#include <dlfcn.h>

#include <exception>
#include <filesystem>
#include <mutex>
#include <string>

#include "tensor/device_memory.hpp"
#include "tensor/tensor.hpp"

namespace mactor::tensor {

namespace {

// The module's entry point: registers the backend and checks device `index` is there; throws
// std::exception with the reason when it is not.
using register_backend = void (*)(int index);
constexpr const char* module_name = "libmactor_cuda_backend.so";
constexpr const char* entry_name = "mactor_cuda_backend_register";

std::filesystem::path module_path() {
  std::error_code ec;
  const auto program = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (ec ? std::filesystem::path(".") : program.parent_path()) / module_name;
}

}  // namespace

void require_device_backend(device where) {
  if (where.type == device_type::cpu) return;
  static std::mutex mutex;
  static register_backend loaded = nullptr;  // set once the module is in
  const std::lock_guard lock(mutex);
  if (!loaded && has_device_memory(where.type)) return;  // linked in, or a test's pseudo-device
  const std::string device_name = to_string(where);
  if (!loaded) {
    const auto path = module_path();
    void* module = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!module)
      throw tensor_error(device_name + ": cannot load the CUDA backend: " + ::dlerror() +
                         " (this build has no GPU code without the CUDA toolkit; train on the host with "
                         "MACTOR_DEVICE=cpu, or build mactor where nvcc is found)");
    auto* entry = reinterpret_cast<register_backend>(::dlsym(module, entry_name));
    if (!entry) throw tensor_error(device_name + ": " + path.string() + " has no " + entry_name + " (a stale build?)");
    loaded = entry;
  }
  try {
    loaded(where.index);
  } catch (const std::exception& e) {
    throw tensor_error(device_name + ": " + e.what());
  }
}

}  // namespace mactor::tensor

// MACTOR_DEVICE.
#include "training/compute_device.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace mactor::training {

tensor::device compute_device(int local_rank) {
  const char* text = std::getenv("MACTOR_DEVICE");
  const std::string value = text ? text : "cpu";
  if (value == "cpu" || value.empty()) return tensor::cpu;
  if (value == "cuda") return {tensor::device_type::cuda, local_rank};
  throw std::invalid_argument("MACTOR_DEVICE=" + value + ": use cpu (the default) or cuda");
}

}  // namespace mactor::training

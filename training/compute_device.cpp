// MACTOR_DEVICE.
#include "training/compute_device.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/optimizer_state.hpp"
#include "tensor/device_backend.hpp"

namespace mactor::training {

tensor::device compute_device(int local_rank) {
  const char* text = std::getenv("MACTOR_DEVICE");
  const std::string value = text ? text : "cpu";
  if (value == "cpu" || value.empty()) return tensor::cpu;
  if (value == "cuda") {
    const tensor::device gpu{tensor::device_type::cuda, local_rank};
    tensor::require_device_backend(gpu);
    return gpu;
  }
  throw std::invalid_argument("MACTOR_DEVICE=" + value + ": use cpu (the default) or cuda");
}

std::string device_gaps(const config::megatron_args& a) {
  std::vector<std::string> gaps;
  // fp8's GEMM operands are rounded through fp8 by the device's kernels; --fp8-param-gather's
  // weight bytes and their casts live on the host.
  if (a.transformer_engine.fp8 && a.transformer_engine.fp8_param_gather)
    gaps.push_back("--fp8-param-gather (the fp8 weight bytes are cast and gathered on the host)");
  // fp32, bf16 and fp16 moments live on the device (model::scaled_state); fp8's E4M3 codes on the host.
  // Megatron's HybridDeviceOptimizer keeps the optimizer in host memory to spare the GPU's; here
  // the optimizer runs beside the model, so the offload would not spare anything.
  if (a.training.optimizer_cpu_offload)
    gaps.push_back("--optimizer-cpu-offload (the optimizer runs beside the model on the GPU; its host placement "
                   "is not built)");
  // (validation turns the flags' values into torch's names: say them as the flags spell them)
  const auto spelled = [](const std::string& dtype) {
    const auto type = model::parse_state_dtype(dtype);
    return type ? std::string(model::to_string(*type)) : dtype;
  };
  const auto m = spelled(a.experimental.exp_avg_dtype), v = spelled(a.experimental.exp_avg_sq_dtype);
  if (m == "fp8" || v == "fp8")
    gaps.push_back("--exp-avg-dtype/--exp-avg-sq-dtype " + m + "/" + v +
                   " (fp8 Adam moments live on the host; use bf16, fp16 or fp32)");
  if (gaps.empty()) return "";
  std::string message = "MACTOR_DEVICE=cuda: not built on a GPU yet:";
  for (const auto& g : gaps) message += "\n  " + g;
  return message + "\ntrain this run on the host (MACTOR_DEVICE=cpu), or leave those flags out";
}

}  // namespace mactor::training

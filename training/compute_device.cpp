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

std::string device_gaps(const config::megatron_args& a, bool mamba) {
  std::vector<std::string> gaps;
  if (a.distributed.context_parallel_size > 1) {
    // Ring attention computes its blocks and their log-sum-exps on the host; Ulysses (a2a) and
    // allgather run the attention kernel itself. Document masks turn rings into allgather.
    const bool masked = a.data.reset_attention_mask && a.data.create_attention_mask_in_dataloader;
    bool ring = a.distributed.cp_comm_type.empty();
    for (const auto& type : a.distributed.cp_comm_type) ring |= type == "p2p" || type == "a2a+p2p";
    if (ring && !masked)
      gaps.push_back("--context-parallel-size " + std::to_string(a.distributed.context_parallel_size) +
                     " with --cp-comm-type p2p or a2a+p2p (ring attention computes its blocks on the host; "
                     "--cp-comm-type a2a and allgather run on a GPU)");
  }
  if (mamba) gaps.push_back("Mamba layers (the SSD scan, causal convolution and gated norm run on the host)");
  if (a.transformer_engine.fp8) gaps.push_back("--fp8-format (fp8 is emulated on the host)");
  if (a.training.optimizer == "sgd") gaps.push_back("--optimizer sgd (use adam)");
  // fp32 and bf16 moments live on the device (model::scaled_state); fp16's and fp8's scaled storage on the host.
  const auto on_device = [](const std::string& dtype) {
    const auto type = model::parse_state_dtype(dtype);
    return type == model::state_dtype::fp32 || type == model::state_dtype::bf16;
  };
  if (!on_device(a.experimental.exp_avg_dtype) || !on_device(a.experimental.exp_avg_sq_dtype))
    gaps.push_back("--exp-avg-dtype/--exp-avg-sq-dtype " + a.experimental.exp_avg_dtype + "/" +
                   a.experimental.exp_avg_sq_dtype + " (fp16 and fp8 Adam moments live on the host; use bf16 or fp32)");
  if (gaps.empty()) return "";
  std::string message = "MACTOR_DEVICE=cuda: not built on a GPU yet:";
  for (const auto& g : gaps) message += "\n  " + g;
  return message + "\ntrain this run on the host (MACTOR_DEVICE=cpu), or leave those flags out";
}

}  // namespace mactor::training

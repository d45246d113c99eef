// The flag support table. Every later piece of work moves the flags it makes work into `implemented`.
#include "config/flag_status.hpp"

#include <map>
#include <sstream>

#include "config/flag_table.hpp"

namespace mactor::config {
namespace {

constexpr std::string_view performance_only = "performance-only; mactor's kernels give the same result without it";
constexpr std::string_view gpu_comm_only = "tunes NCCL/GPU communication; has no effect on mactor's transports";
constexpr std::string_view ignored_by_megatron = "ignored by Megatron-LM itself";

// Flags whose Megatron meaning mactor has (kept sorted by group for review).
const std::map<std::string_view, std::string_view>& implemented_flags() {
  static const std::map<std::string_view, std::string_view> table = {
      {"seed", "seeds initialization and data shuffling"},
  };
  return table;
}

const std::map<std::string_view, std::string_view>& accepted_flags() {
  static const std::map<std::string_view, std::string_view> table = {
      {"masked_softmax_fusion", performance_only},
      {"bias_gelu_fusion", performance_only},
      {"bias_swiglu_fusion", performance_only},
      {"bias_dropout_fusion", performance_only},
      {"apply_rope_fusion", performance_only},
      {"cross_entropy_loss_fusion", performance_only},
      {"cross_entropy_fusion_impl", performance_only},
      {"use_flash_attn", performance_only},
      {"gradient_accumulation_fusion", performance_only},
      {"no_persist_layer_norm", performance_only},
      {"moe_permute_fusion", performance_only},
      {"moe_router_fusion", performance_only},
      {"gradient_reduce_div_fusion", performance_only},
      {"attention_backend", "mactor has one attention implementation (the local spec's, exact softmax in fp32)"},
      {"transformer_impl", "mactor has one transformer implementation, numerically Megatron's local spec"},
      {"use_cpu_initialization", "mactor always initializes parameters on the CPU, as this flag asks"},
      {"async_tensor_model_parallel_allreduce", ignored_by_megatron},
      {"deprecated_use_mcore_models", ignored_by_megatron},
      {"fp8_interval", ignored_by_megatron},
      {"pin_cpu_grads", gpu_comm_only},
      {"pin_cpu_params", gpu_comm_only},
      {"distributed_backend", "mactor's own transports (UCX, NCCL, in-process) replace torch.distributed backends"},
      {"distributed_timeout_minutes", "torch.distributed timeout; mactor's transports have their own failure detection"},
      {"distributed_timeout_seconds_after_init", "torch.distributed timeout; mactor's transports have their own failure detection"},
      {"nccl_communicator_config_path", gpu_comm_only},
      {"nccl_ub", gpu_comm_only},
      {"disable_symmetric_registration", gpu_comm_only},
      {"use_sharp", gpu_comm_only},
      {"sharp_enabled_group", gpu_comm_only},
      {"high_priority_stream_groups", gpu_comm_only},
      {"ddp_pad_buckets_for_high_nccl_busbw", gpu_comm_only},
      {"tp_comm_bootstrap_backend", gpu_comm_only},
      {"enable_gloo_process_groups", "mactor has no Gloo process groups"},
      {"empty_unused_memory_level", "PyTorch caching-allocator control; mactor frees buffers itself"},
      {"manual_gc", "Python garbage-collector control; there is no Python runtime in mactor"},
      {"manual_gc_interval", "Python garbage-collector control; there is no Python runtime in mactor"},
      {"manual_gc_eval", "Python garbage-collector control; there is no Python runtime in mactor"},
      {"local_rank", "torch.distributed.launch passes it; mactor reads the rank from the launcher's environment"},
      {"create_attention_mask_in_dataloader", "mactor applies the causal mask inside attention; the result is the same"},
      {"barrier_with_L1_time", "timer barrier placement; does not change results"},
      {"logging_level", "Python logging level; mactor's log lines do not depend on it"},
      {"te_rng_tracker", "Transformer Engine RNG tracker; mactor has no Transformer Engine"},
  };
  return table;
}

}  // namespace

flag_support support_of(std::string_view dest) {
  if (auto it = implemented_flags().find(dest); it != implemented_flags().end()) return {support::implemented, it->second};
  if (auto it = accepted_flags().find(dest); it != accepted_flags().end()) return {support::accepted_without_effect, it->second};
  return {support::not_implemented, "not built yet"};
}

std::string_view support_name(support s) {
  switch (s) {
    case support::implemented: return "implemented";
    case support::accepted_without_effect: return "accepted without effect";
    default: return "not implemented yet";
  }
}

std::string flag_status_table() {
  std::ostringstream out;
  out << "flag\tgroup\tstatus\treason\n";
  for (const auto& s : flag_specs()) {
    const auto st = support_of(s.dest);
    std::string names;
    for (const auto& o : s.options) names += (names.empty() ? "" : "|") + o;
    out << names << '\t' << flag_groups()[static_cast<std::size_t>(s.group)].name << '\t' << support_name(st.status) << '\t'
        << st.reason << '\n';
  }
  return out.str();
}

support_report check_support(const megatron_args& args) {
  support_report report;
  const megatron_args defaults;
  for_each_flag_field(
      [&](std::string_view dest, const auto& value, const auto& default_value) {
        if (value == default_value) return;
        const auto st = support_of(dest);
        const auto* spec = find_dest(dest);
        const std::string flag = spec ? spec->options.front() : std::string(dest);
        if (st.status == support::not_implemented)
          report.errors.push_back(flag + " is recognized but not implemented by mactor yet");
        else if (st.status == support::accepted_without_effect)
          report.warnings.push_back("WARNING: " + flag + " is accepted without effect: " + std::string(st.reason));
      },
      static_cast<const flag_args&>(args), static_cast<const flag_args&>(defaults));
  return report;
}

}  // namespace mactor::config

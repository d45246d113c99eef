// How long each op of a pipeline rank takes and how many bytes it moves, from a resolved
// Megatron config and a system file. One representative rank per pipeline stage: every
// data-, tensor- and context-parallel rank of a stage runs the same ops on equal shards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/megatron_args.hpp"
#include "simulate/collectives.hpp"
#include "simulate/system_spec.hpp"

namespace mactor::simulate {

/// One model chunk of one pipeline rank, per microbatch. Times are seconds on one accelerator,
/// the exposed tensor- and context-parallel communication included (and also given apart).
struct chunk_cost {
  int layers = 0;
  bool embedding = false;   ///< holds the input embedding (first virtual stage)
  bool loss = false;        ///< holds the output layer and the loss (last virtual stage)
  double forward_s = 0;
  double backward_s = 0;    ///< with the recomputed forward under --recompute-granularity
  /// The weight-gradient GEMMs within backward_s: what a zero-bubble schedule's W pass runs (its
  /// backward runs the rest).
  double weight_grad_s = 0;
  double forward_tp_s = 0, backward_tp_s = 0;  ///< exposed tensor-parallel collectives within the above
  double forward_cp_s = 0, backward_cp_s = 0;  ///< exposed context-parallel exchanges within the above (context_parallel_cost.hpp)
  double forward_ep_s = 0, backward_ep_s = 0;  ///< MoE token exchange (expert parallel) within the above
  /// FSDP's parameter gathers and gradient reduce-scatters around each forward and backward,
  /// exposed, within the above.
  double forward_fsdp_s = 0, backward_fsdp_s = 0;
  double parameters = 0;    ///< parameters this chunk holds on one tensor-parallel rank
  double expert_parameters = 0;  ///< of which MoE experts (synced over the expert-data-parallel group)
  double dp_sync_s = 0;     ///< this chunk's gradient reduce(-scatter) over the data-parallel group
  double param_gather_s = 0;  ///< distributed optimizer: this chunk's parameter all-gather
  double activation_bytes = 0;  ///< what one microbatch in flight keeps until its backward
  /// Held only while one backward runs: the recomputed layers' activations, the fp32 logits.
  double backward_transient_bytes = 0;
};

/// Everything the virtual clock needs, for every pipeline rank.
struct cost_model {
  std::vector<std::vector<chunk_cost>> chunks;  ///< [pipeline rank][local chunk]
  double p2p_bytes = 0;            ///< one activation (or gradient) between pipeline stages
  double p2p_seconds = 0;          ///< its transfer time
  std::vector<double> optimizer_s; ///< [pipeline rank] the optimizer step
  double model_flops_per_iteration = 0;  ///< Megatron's num_floating_point_operations, whole job
  std::int64_t padded_vocab_size = 0;
  int tensor = 1, context = 1, data = 1, pipeline = 1, virtual_stages = 1;
  double peak_flops = 0;           ///< per accelerator, for the dtype in use
  std::vector<std::string> notes;  ///< simplifications that apply to this config
};

/// The bytes each rank keeps per microbatch for one transformer layer (Korthikanti et al. 2022,
/// Table 2, as Megatron's theoretical_memory_usage.py counts them) under the config's
/// sequence parallelism and recompute granularity; `recomputed` = full recompute of this layer.
double layer_activation_bytes(const config::megatron_args& a, bool recomputed);

/// The flags whose effect the simulator does not model, one message each naming the flag.
std::vector<std::string> unsupported_flags(const config::megatron_args& a);

/// Builds the costs. `padded_vocab` is the vocabulary size after Megatron's padding.
cost_model build_cost_model(const config::megatron_args& a, const system_spec& system, std::int64_t padded_vocab);

}  // namespace mactor::simulate

// The model chunks' parameters as the other parts of a stage see them: grad sync (flat buffers,
// when each gradient is complete, the tied embedding) and the optimizer (whole parameters, or
// this rank's slices with the distributed optimizer).
#pragma once

#include <vector>

#include "config/megatron_args.hpp"
#include "model/gpt_chunk.hpp"
#include "model/optimizer_param.hpp"
#include "training/grad_sync.hpp"
#include "training/main_grads.hpp"
#include "training/main_params.hpp"

namespace mactor::training {

/// Megatron's DDP settings for this stage (buckets, overlap) from the flags; rank_parameters
/// (every chunk's elements on this rank) sizes the buckets under --ddp-num-buckets.
grad_sync_options grad_sync_options_of(const config::megatron_args& args, bool distributed_optimizer,
                                       bool sequence_parallel, std::int64_t rank_parameters);
/// Each chunk's flat buffers and its parameters' places and readiness events.
std::vector<synced_chunk> synced_chunks(std::vector<model::gpt_chunk>& chunks);
/// The optimizer's parameters: whole, or with the distributed optimizer this rank's slice of each
/// chunk's flat buffer (its gradients are the reduce-scattered shard); their values are the
/// fp32 main parameters, their gradients the fp32 main gradients.
/// Where this rank stands, so that the gradient statistics (grad norm, zeros, params norm) count
/// every piece of the model once (Megatron's param_is_not_tensor_parallel_duplicate and
/// param_is_not_shared; its expert parameters' own statistics group).
struct stats_place {
  int tp_rank = 0, ep_rank = 0;
  /// MoE runs sum the statistics over the whole world (stage_engine::reduce_stats), so each
  /// piece counts on one rank: the first data- and context-parallel replica (or its shard's
  /// holder with the distributed optimizer), the experts on their first expert-data-parallel
  /// replica when experts_apart (their shard's holder with the distributed optimizer); with
  /// several optimizer instances, the shard's holder in the first instance.
  bool over_world = false;
  bool experts_apart = false;
  int dp_rank = 0, cp_rank = 0, expert_dp_rank = 0, optimizer_instance = 0;
};
std::vector<model::optim_param> optimizer_params(std::vector<model::gpt_chunk>& chunks, main_params& main,
                                                main_grads& grads, grad_sync& sync,
                                                const config::megatron_args& args, const stats_place& place);

}  // namespace mactor::training

// What the data-parallel replicas shard of the model's training state, from the flags that choose
// it: Megatron FSDP's --data-parallel-sharding-strategy (with --use-megatron-fsdp), torch FSDP2
// (--use-torch-fsdp2: everything sharded) and the distributed optimizer (the optimizer state).
// Training and the simulator ask this instead of reading the flags.
#pragma once

#include "config/megatron_args.hpp"

namespace mactor::config {

/// ZeRO stages by Megatron FSDP's names: no_shard (plain DDP), optim (ZeRO-1: the optimizer state
/// and main parameters), optim_grads (ZeRO-2: also the reduced gradients), optim_grads_params
/// (ZeRO-3: also the model's parameters, gathered around each forward and backward).
enum class dp_sharding { no_shard, optim, optim_grads, optim_grads_params };

struct sharding_plan {
  dp_sharding strategy = dp_sharding::no_shard;
  /// optim_grads_params: free the gathered parameters after each forward (torch FSDP2's
  /// reshard_after_forward); otherwise they stay until the chunk's last backward of the step.
  bool reshard_after_forward = true;
  /// --fsdp-double-buffer: two gather buffers reused for every gather, instead of one allocated
  /// for each.
  bool double_buffer = false;

  bool shards_optimizer() const { return strategy != dp_sharding::no_shard; }
  bool shards_params() const { return strategy == dp_sharding::optim_grads_params; }
};

sharding_plan sharding_plan_of(const config::megatron_args& a);
/// True when the optimizer state is sharded over the data-parallel replicas (the distributed
/// optimizer, or FSDP with any strategy but no_shard).
inline bool shards_optimizer(const config::megatron_args& a) { return sharding_plan_of(a).shards_optimizer(); }

}  // namespace mactor::config

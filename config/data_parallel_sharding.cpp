// The sharding strategy the flags choose (see data_parallel_sharding.hpp).
#include "config/data_parallel_sharding.hpp"

namespace mactor::config {

sharding_plan sharding_plan_of(const config::megatron_args& a) {
  const auto& d = a.distributed;
  sharding_plan p;
  if (d.use_torch_fsdp2) {
    p.strategy = dp_sharding::optim_grads_params;
    p.reshard_after_forward = d.torch_fsdp2_reshard_after_forward;
    return p;
  }
  if (d.use_megatron_fsdp) {
    const auto& s = d.data_parallel_sharding_strategy;
    p.strategy = s == "optim"                ? dp_sharding::optim
                 : s == "optim_grads"        ? dp_sharding::optim_grads
                 : s == "optim_grads_params" ? dp_sharding::optim_grads_params
                                             : dp_sharding::no_shard;
    p.double_buffer = d.fsdp_double_buffer;
  }
  // --use-distributed-optimizer shards the optimizer whatever else is (not) sharded.
  if (p.strategy == dp_sharding::no_shard && d.use_distributed_optimizer) p.strategy = dp_sharding::optim;
  return p;
}

}  // namespace mactor::config

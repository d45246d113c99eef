// Bytes per parameter: the weight in its dtype, a gradient in fp32 (bf16 with
// --grad-reduce-in-bf16), and for Adam two fp32 moments plus an fp32 main copy under mixed
// precision; the distributed optimizer shards the last over the data-parallel (x context-parallel)
// group, as Megatron's DistributedOptimizer does (the MoE experts' over the expert-data-parallel one).
#include "simulate/memory_model.hpp"

#include <algorithm>

#include "config/data_parallel_sharding.hpp"
#include "simulate/layer_kinds.hpp"

namespace mactor::simulate {

rank_memory memory_of(const config::megatron_args& a, const std::vector<chunk_cost>& chunks,
                      double peak_activation_bytes) {
  double params = 0, experts = 0;
  for (const auto& c : chunks) params += c.parameters, experts += c.expert_parameters;
  const bool mixed = a.mixed_precision.bf16 || a.mixed_precision.fp16;
  const double weight_bytes = mixed ? 2 : 4;
  const double grad_bytes = a.mixed_precision.grad_reduce_in_bf16 ? 2 : 4;
  const double adam_bytes = a.training.optimizer == "sgd" ? 4 : 8;
  const double state_bytes = adam_bytes + (mixed ? 4 : 0);
  // --num-distributed-optimizer-instances keeps that many full copies, each sharded over its part.
  // The experts' shards are over their expert-data-parallel group.
  const double instances = static_cast<double>(a.distributed.num_distributed_optimizer_instances);
  const auto plan = config::sharding_plan_of(a);
  const bool sharded = plan.shards_optimizer();
  const double shards =
      sharded ? static_cast<double>(a.derived.data_parallel_size * a.distributed.context_parallel_size) / instances : 1;
  const double expert_shards = sharded ? std::max(1.0, expert_data_parallel_size(a) / instances) : 1;
  rank_memory m;
  // FSDP keeps only its shard of the gradients (ZeRO-2) and of the weights (ZeRO-3); the whole
  // ones a chunk needs around its compute are the backward's transient memory.
  m.parameters = params * weight_bytes / (plan.shards_params() ? shards : 1);
  m.gradients = params * grad_bytes / (plan.strategy >= config::dp_sharding::optim_grads ? shards : 1);
  m.optimizer = (params - experts) * state_bytes / shards + experts * state_bytes / expert_shards;
  m.activations = peak_activation_bytes;
  return m;
}

}  // namespace mactor::simulate

// Bytes per parameter: the weight in its dtype, a gradient in fp32 (bf16 with
// --grad-reduce-in-bf16), and for Adam two fp32 moments plus an fp32 main copy under mixed
// precision; the distributed optimizer shards the last over the data-parallel (x context-parallel)
// group, as Megatron's DistributedOptimizer does.
#include "simulate/memory_model.hpp"

namespace mactor::simulate {

rank_memory memory_of(const config::megatron_args& a, const std::vector<chunk_cost>& chunks,
                      double peak_activation_bytes) {
  double params = 0;
  for (const auto& c : chunks) params += c.parameters;
  const bool mixed = a.mixed_precision.bf16 || a.mixed_precision.fp16;
  const double weight_bytes = mixed ? 2 : 4;
  const double grad_bytes = a.mixed_precision.grad_reduce_in_bf16 ? 2 : 4;
  const double adam_bytes = a.training.optimizer == "sgd" ? 4 : 8;
  const double state_bytes = adam_bytes + (mixed ? 4 : 0);
  // --num-distributed-optimizer-instances keeps that many full copies, each sharded over its part.
  const double shards = a.distributed.use_distributed_optimizer
                            ? static_cast<double>(a.derived.data_parallel_size * a.distributed.context_parallel_size) /
                                  static_cast<double>(a.distributed.num_distributed_optimizer_instances)
                            : 1;
  rank_memory m;
  m.parameters = params * weight_bytes;
  m.gradients = params * grad_bytes;
  m.optimizer = params * state_bytes / shards;
  m.activations = peak_activation_bytes;
  return m;
}

}  // namespace mactor::simulate

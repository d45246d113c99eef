// --ckpt-format torch with --use-distributed-optimizer: Megatron's distrib_optim.pt beside each
// model_optim_rng.pt (DistributedOptimizer.save_parameter_state, "dp_zero_gather_scatter"). The
// first data-parallel rank of each (tensor, pipeline) rank gathers the shards and writes, per
// gradient buffer (one per model chunk for a dense model), the fp32 main parameters and Adam's
// two moments as flat tensors laid out as Megatron's _ParamAndGradBuffer lays out its buffer:
//   {'buckets_coalesced': True,
//    gbuf_idx: {(param_dtype, grad_dtype): {'param': T, 'exp_avg': T, 'exp_avg_sq': T,
//                                           'numel_unpadded': n}}}
// The model file's 'optimizer' then holds no per-parameter state, only the param groups (with
// their 'step') and the loss scaler.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/pickle_value.hpp"
#include "config/megatron_args.hpp"
#include "model/gpt_chunk.hpp"
#include "training/parallel_context.hpp"
#include "training/stage_engine.hpp"

namespace mactor::training {

/// Where a chunk's parameters sit in Megatron's world tensors: the buffer takes the parameters in
/// reverse order, starts each at a multiple of 64 elements, gives a tied embedding shared across
/// pipeline stages a bucket of its own, and the world tensors drop the padding after each bucket.
struct megatron_buffer_layout {
  std::vector<std::size_t> offsets;  ///< per chunk.parameters() index
  std::size_t numel_unpadded = 0;
};
megatron_buffer_layout buffer_layout_of(model::gpt_chunk& chunk, bool shared_embedding_buckets);

/// model_optim_rng.pt's 'optimizer' with the distributed optimizer (DistributedOptimizer.state_dict):
/// {'optimizer': {'param_groups': [...each with 'step'...]}, 'grad_scaler': {...}}.
checkpoint::pickle_value distributed_optimizer_dict(const config::megatron_args& a, stage_engine& engine);

/// distrib_optim.pt's state dict on the writing rank (data- and context-parallel rank 0), nullopt
/// elsewhere. Collective over the optimizer's shard group: every rank of it must call this.
std::optional<checkpoint::pickle_value> distrib_optim_state(const config::megatron_args& a, parallel_context& ctx,
                                                            stage_engine& engine);

/// Loads this rank's shard of the main parameters and Adam's moments from distrib_optim.pt's
/// state, and Adam's step from the model file's 'optimizer' (`model_optimizer`). Throws
/// checkpoint_error naming `where` when the file does not fit this model.
void load_distrib_optim(const checkpoint::pickle_value& state, const checkpoint::pickle_value& model_optimizer,
                        const config::megatron_args& a, stage_engine& engine, const std::string& where);

}  // namespace mactor::training

// The model chunks' parameters as grad sync and the optimizer see them.
#include "training/chunk_params.hpp"

#include <algorithm>

#include "config/moe_layout.hpp"

namespace mactor::training {
namespace {

// The backward event after which a parameter's gradient is complete (see gpt_chunk::backward).
int ready_event(const model::gpt_chunk& chunk, const std::string& name) {
  const std::string layers = "decoder.layers.";
  if (name.rfind(layers, 0) == 0) return std::stoi(name.substr(layers.size())) - chunk.layout().layer_begin;
  if (name.rfind("embedding.", 0) == 0 && chunk.layout().pre_process) return model::gpt_chunk::backward_done_embedding;
  return chunk.backward_done_final_norm();  // final norm, output layer, the tied embedding's copy
}

}  // namespace

grad_sync_options grad_sync_options_of(const config::megatron_args& a, bool distributed_optimizer, bool sequence_parallel,
                                       std::int64_t rank_parameters) {
  grad_sync_options o;
  o.distributed_optimizer = distributed_optimizer;
  o.sum_over_replicas = a.training.calculate_per_token_loss;
  // The experts reduce over their own expert-data-parallel group.
  o.expert_parallel = config::experts_have_own_groups(a);
  // Megatron checks the local gradient norms in its DDP buffers only: Megatron FSDP (every
  // strategy) and torch FSDP2 never read --check-for-large-grads.
  o.check_for_large_grads =
      a.training.check_for_large_grads && !a.distributed.use_megatron_fsdp && !a.distributed.use_torch_fsdp2;
  // With the distributed optimizer and sequence parallelism, the tensor-parallel sum must
  // precede the reduce-scatter, on the stage's thread: those gradients are reduced at finalize.
  o.overlap_grad_reduce = a.distributed.overlap_grad_reduce && !(distributed_optimizer && sequence_parallel);
  o.overlap_param_gather = a.distributed.overlap_grad_reduce && a.distributed.overlap_param_gather;
  // Megatron's default bucket: max(40M, 1M x dp) elements.
  o.bucket_size = a.distributed.ddp_bucket_size.value_or(
      std::max<std::int64_t>(40000000, 1000000LL * a.derived.data_parallel_size));
  // --ddp-num-buckets: Megatron's num_parameters // N, over every chunk this rank holds.
  if (a.distributed.ddp_num_buckets) o.bucket_size = std::max<std::int64_t>(1, rank_parameters / *a.distributed.ddp_num_buckets);
  return o;
}

std::vector<synced_chunk> synced_chunks(std::vector<model::gpt_chunk>& chunks) {
  std::vector<synced_chunk> out;
  for (auto& chunk : chunks) {
    auto& store = chunk.store();
    synced_chunk s{store.value_tensor().view(), store.grad_tensor().view(), {}, store.expert_begin()};
    if (store.laid_out_only()) {  // --init-model-with-meta-device: the layout's size and dtypes, no memory yet
      const std::int64_t n = static_cast<std::int64_t>(store.flat_numel());
      s.values = tensor::tensor_view{nullptr, {n}, store.type(), tensor::cpu};
      s.grads = tensor::tensor_view{nullptr, {n}, store.grad_type(), tensor::cpu};
    }
    const bool tied_here = chunk.config().shares_word_embedding() &&
                           (chunk.layout().pre_process || chunk.layout().post_process);
    for (const auto& p : chunk.parameters())
      s.params.push_back({p.offset, p.numel, ready_event(chunk, p.name),
                          tied_here && p.name == "embedding.word_embeddings.weight", chunk.unit_of(p)});
    out.push_back(std::move(s));
  }
  return out;
}

// The optimizer's view of the parameters: whole, or with the distributed optimizer this rank's
// slice of each chunk's flat buffer (its gradients are the reduce-scattered shard).
std::vector<model::optim_param> optimizer_params(std::vector<model::gpt_chunk>& chunks, main_params& main,
                                                main_grads& grads, grad_sync& sync,
                                                const config::megatron_args& args, const stats_place& place) {
  const bool decoupled = args.learning_rate.decoupled_lr.has_value();
  const bool tp_first = place.tp_rank == 0;
  std::vector<model::optim_param> params;
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    auto& chunk = chunks[c];
    auto* shard = sync.shard_of(c);
    for (auto& p : chunk.parameters()) {
      // This rank's part of p: all of it, or where it meets one of the shard's ranges (a
      // parameter lies inside one region, so it meets at most one).
      std::size_t lo = p.offset, hi = p.offset + p.numel, at = p.offset;
      if (shard) {
        lo = hi = 0;
        for (const auto& r : shard->ranges)
          if (std::max(p.offset, r.begin) < std::min(p.offset + p.numel, r.end)) {
            lo = std::max(p.offset, r.begin), hi = std::min(p.offset + p.numel, r.end);
            at = r.at + (lo - r.begin);
          }
        if (lo >= hi) continue;
      }
      float* grad = grads.values(c) + at;
      model::optim_param o;
      o.name = p.name;
      o.value = main.value_at(c, lo);
      o.grad = grad;
      o.numel = hi - lo;
      o.where = chunk.store().value_tensor().where();
      o.no_weight_decay = p.no_weight_decay;
      // Megatron applies --decoupled-lr to the embedding and the output layer.
      o.decoupled_lr = decoupled && (p.name.rfind("embedding.", 0) == 0 || p.name.rfind("output_layer.", 0) == 0);
      // Counted once: tensor-parallel duplicates on tp rank 0 only, the tied embedding on the
      // first stage only (Megatron's param_is_not_tensor_parallel_duplicate / param_is_not_shared).
      const bool tp_duplicate = p.split == model::tp_split::replicated && !tp_first;
      bool duplicate;
      if (place.over_world && p.expert && place.experts_apart)  // every instance holds the experts' shards
        duplicate = shard ? place.optimizer_instance != 0 : place.expert_dp_rank != 0;
      else if (place.over_world)
        duplicate = tp_duplicate || (shard ? place.optimizer_instance != 0 : place.dp_rank != 0 || place.cp_rank != 0);
      else  // the model-parallel group's sum, then the shards' (see stage_engine::reduce_stats)
        duplicate = tp_duplicate;
      const bool shared_copy = !chunk.layout().pre_process && p.name == "embedding.word_embeddings.weight";
      o.in_grad_stats = !duplicate && !shared_copy;
      params.push_back(std::move(o));
    }
  }
  return params;
}

}  // namespace mactor::training

// The stage engine's optimizer side: gradients finalized over their groups, the statistics and
// checks that read them, the optimizer step, and the copies between the model's parameters and the
// main (and fp8 / fp16) ones. The schedule side is in stage_engine.cpp.
#include "training/stage_engine.hpp"

#include <stdexcept>
#include <string>

#include "model/grad_clip.hpp"
#include "training/qk_norm_check.hpp"
#include "training/weight_hash_check.hpp"

namespace mactor::training {
// --fp8-param-gather: the fp8-GEMM weights become fp8 (cast from the initial main parameters),
// and the parameter all-gather moves their bytes.
void stage_engine::hold_fp8_weights() {
  fp8_params_ = std::make_unique<training::fp8_params>(chunks_, *main_params_);
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    std::vector<fp8_weight_place> places;
    for (const auto& w : fp8_params_->weights(c)) places.push_back({w.offset, w.numel, w.byte_offset});
    grad_sync_->gather_fp8(c, chunks_[c].store().value_tensor().view(), fp8_params_->bytes(c), std::move(places));
  }
}

void stage_engine::model_params_from_main() {
  const tensor::default_device_scope on_device(device_);
  main_params_->copy_all_to_model();
  // The fp8-held weights as after a step: this rank casts its shard (the whole weight's amax,
  // max-reduced over the shard group, recorded once) and the all-gather brings the other
  // shards' bytes. (A torch checkpoint's masters outside this rank's shard are the fp8 values
  // it saved, not the fp32 ones: their amax would differ.) Collective over the shard group.
  if (fp8_params_) {
    cast_fp8_weights();
    grad_sync_->start_param_sync();
    grad_sync_->wait_param_sync();
  }
  if (fp16_main_) fp16_main_->store(optimizer_->params());  // FusedAdam's load_state_dict
}

void stage_engine::main_params_from_model() {
  const tensor::default_device_scope on_device(device_);
  main_params_->copy_all_from_model();
  if (fp8_params_) fp8_params_->dequantize_into_main();
  if (fp16_main_) fp16_main_->store(optimizer_->params());
}

void stage_engine::zero_grad() {
  const tensor::default_device_scope on_device(device_);
  for (auto& c : chunks_) c.zero_grad();
  if (fsdp_) fsdp_->zero_grads();
}

void stage_engine::finalize_grads() {
  const tensor::default_device_scope on_device(device_);
  const trace_recorder::scope traced(trace_, "finalize model grads", "grad_sync");
  grad_sync_->record_local_grad_norms();  // --check-for-large-grads: before any reduction
  // Sequence parallelism: norm weights and row-parallel biases saw only this rank's positions;
  // their gradients are summed over the tensor-parallel group (Megatron's
  // _allreduce_layernorm_grads): before the data-parallel sync, or after the overlapped one
  // (both are sums: the same).
  // (FSDP's sharded gradients had theirs summed after each backward.)
  if (!grad_sync_->overlapped() && !fsdp_)
    for (auto& c : chunks_) c.all_reduce_sequence_parallel_grads();
  grad_sync_->finish_grad_sync();
  if (grad_sync_->overlapped())
    for (auto& c : chunks_) c.all_reduce_sequence_parallel_grads();
  finish_router_iteration();
}

// The routers' end of an iteration: global_aux_loss's running counts restart, each router's
// tokens per expert are kept for the inspector, and Megatron's _update_router_expert_bias: every
// biased router's counts of this global batch, summed over the tensor-, context- and data-parallel
// ranks (each routes its own tokens), move its bias.
void stage_engine::finish_router_iteration() {
  // Megatron's reset_model_temporary_tensors: global_aux_loss's running counts restart too.
  for (auto& c : chunks_)
    for (auto* r : c.moe_routers()) r->reset_global_tokens();
  // What the inspector shows: this rank's own counts, before the bias update sums them. A router
  // without a bias starts its count again now; update_expert_bias restarts the others'.
  last_expert_load_.clear();
  std::vector<model::moe_router*> routers;
  for (auto& c : chunks_)
    for (auto* r : c.moe_routers()) {
      last_expert_load_.push_back({r->name(), r->routed_tokens()});
      if (r->expert_bias().empty())
        r->reset_routed_tokens();
      else
        routers.push_back(r);
    }
  if (routers.empty()) return;
  const std::size_t experts = routers.front()->routed_tokens().size();
  std::vector<double> counts;
  counts.reserve(routers.size() * experts);
  for (auto* r : routers) counts.insert(counts.end(), r->routed_tokens().begin(), r->routed_tokens().end());
  if (ctx_.tensor_parallel().size() > 1) ctx_.tensor_parallel().all_reduce_sum(counts.data(), counts.size());
  if (auto* dp = ctx_.data_parallel()) dp->all_reduce(std::span<double>(counts));
  for (std::size_t i = 0; i < routers.size(); ++i)
    routers[i]->update_expert_bias(std::span<const double>(counts).subspan(i * experts, experts));
}

// Megatron's finalize_model_grads with num_tokens: the last stage's token count summed over the
// data-parallel replicas and shared with every stage, then every gradient divided by it. The
// model-parallel sum counts each of the last stage's tensor-parallel ranks once (the others hold 0).
void stage_engine::scale_by_global_tokens() {
  double tokens = is_last_stage() && ctx_.tp_rank() == 0 ? totals_.num_tokens : 0.0;
  if (auto* mp = ctx_.model_parallel()) mp->all_reduce(std::span<double>(&tokens, 1));
  if (auto* dp = ctx_.data_parallel()) dp->all_reduce(std::span<double>(&tokens, 1));
  if (tokens <= 0) return;  // no token to learn from: the gradients are zero already
  model::scale_grads(optimizer_->params(), static_cast<float>(1.0 / tokens));
}

// Sums over the ranks holding different parts of the model: the model-parallel group, then the
// distributed optimizer's shards. A MoE model's experts are laid out over other groups than its
// dense layers: its sums run over the whole world, each piece counted on one rank (stats_place).
void stage_engine::reduce_stats(std::span<double> values) {
  if (stats_over_world_) {
    if (auto* world = ctx_.world()) world->all_reduce(values);
    return;
  }
  if (auto* mp = ctx_.model_parallel()) mp->all_reduce(values);
  if (distributed_optimizer_) ctx_.optimizer_shard_group()->all_reduce(values);
}

void stage_engine::check_qk_norms() {
  sync_params();
  check_qk_norms_across_ranks(chunks_, ctx_.tensor_parallel(), ctx_.data_parallel(), ctx_.rank());
}

void stage_engine::check_weight_hashes_across_replicas() {
  sync_params();  // the distributed optimizer's all-gather must have landed
  // The dense parameters agree over the data-parallel replicas; the experts (which differ
  // between expert-parallel ranks) over the expert-data-parallel ones.
  for (const bool experts : {false, true}) {
    auto* group = experts ? ctx_.expert_data_parallel() : ctx_.data_parallel();
    if (!group) continue;
    std::vector<std::uint64_t> hashes;
    std::vector<std::string> names;
    for (std::size_t c = 0; c < chunks_.size(); ++c)
      for (const auto& p : chunks_[c].parameters())
        if (p.expert == experts) hashes.push_back(fnv1a_hash(weight_bytes(c, p))), names.push_back(p.name);
    if (hashes.empty()) continue;
    const auto differing =
        differing_hashes(hashes, group->size(), [group](std::span<double> v) { group->all_reduce(v); });
    if (differing.empty()) continue;
    std::string list;
    for (auto i : differing) list += (list.empty() ? "" : ", ") + names[i];
    throw std::runtime_error("parameter hashes do not match across the " +
                             std::string(experts ? "expert-data-parallel" : "data-parallel") + " replicas (rank " +
                             std::to_string(ctx_.rank()) + ", data-parallel rank " + std::to_string(ctx_.dp_rank()) +
                             " of " + std::to_string(group->size()) + "): " + list);
  }
}

model::optimizer_step_result stage_engine::optimizer_step(double clip_grad, bool count_zeros) {
  const tensor::default_device_scope on_device(device_);
  activity_.set("optimizer step");
  const auto timed = timers_.time(step_timer::optimizer);
  {
    // Megatron's prepare_grads: every optimizer times this copy (FP32Optimizer's is a pointer
    // swap, as here for an fp32 gradient buffer).
    const auto copy_timer = timers_.time(step_timer::optimizer_copy_to_main_grad);
    main_grads_->copy_from_model();  // a 16-bit gradient buffer: the optimizer's fp32 main grads
  }
  // --calculate-per-token-loss: finalize_model_grads' division by the global batch's tokens,
  // applied to the main grads (the same values as Megatron's scaling of the model grads).
  if (args_.training.calculate_per_token_loss) scale_by_global_tokens();
  if (scaler_) {
    // Megatron's prepare_grads: unscale the main gradients, agree over the gradient-statistics
    // group whether any rank saw an inf or a NaN, update the scale, and skip the step if so.
    double found = 0.0;
    {
      const auto unscale_timer = timers_.time(step_timer::optimizer_unscale_and_check_inf);
      found = model::unscale_and_check(optimizer_->params(), scaler_->inv_scale()) ? 1.0 : 0.0;
      reduce_stats(std::span<double>(&found, 1));
    }
    scaler_->update(found > 0.0);
    if (found > 0.0) {
      activity_.set("idle");
      model::optimizer_step_result skipped;
      skipped.update_successful = false;
      return skipped;
    }
  }
  // Each part of the step timed on its own, as Megatron's optimizer step does.
  const auto result = model::clip_and_step(
      *optimizer_, clip_grad, count_zeros, [this](std::span<double> v) { reduce_stats(v); },
      [this](model::step_part part, const std::function<void()>& work) {
        const auto timer = part == model::step_part::clip_main_grad ? step_timer::optimizer_clip_main_grad
                           : part == model::step_part::count_zeros  ? step_timer::optimizer_count_zeros
                                                                    : step_timer::optimizer_inner_step;
        const auto timed_part = timers_.time(timer);
        work();
      });
  // A 16-bit model takes the updated main parameters, rounded: this rank's shard of each chunk
  // with the distributed optimizer (the all-gather brings the rest), else all of them.
  {
    // Megatron's mixed-precision optimizers (16-bit models, and the distributed optimizer in any
    // dtype) time this copy; its FP32Optimizer has none.
    std::optional<step_timers::scope> copy_timer;
    if (tensor::is_half_precision(chunks_.front().dtype()) || distributed_optimizer_)
      copy_timer.emplace(timers_, step_timer::optimizer_copy_main_to_model_params);
    for (std::size_t c = 0; c < chunks_.size(); ++c) {
      if (const auto* shard = grad_sync_->shard_of(c))
        for (const auto& r : shard->ranges) main_params_->copy_to_model(c, r.begin, r.end);
      else
        main_params_->copy_to_model(c, 0, chunks_[c].store().flat_numel());
    }
    if (fp8_params_) cast_fp8_weights();
    // The model took the fp32 update; the master keeps its fp16 rounding.
    if (fp16_main_) fp16_main_->store(optimizer_->params());
  }
  {
    // Megatron's distributed optimizer times its all-gather even over one replica (with
    // --overlap-param-gather, the posting only, as Megatron's does).
    std::optional<step_timers::scope> gather_timer;
    if (config::shards_optimizer(args_)) gather_timer.emplace(timers_, step_timer::params_all_gather);
    grad_sync_->start_param_sync();
  }
  activity_.set("idle");
  return result;
}

// TE's cast_master_weights_to_fp8: this rank's shard of each chunk (all of it without sharding).
void stage_engine::cast_fp8_weights() {
  std::vector<std::vector<training::fp8_params::range>> ranges(chunks_.size());
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    if (const auto* shard = grad_sync_->shard_of(c))
      for (const auto& r : shard->ranges) ranges[c].push_back({r.begin, r.end});
    else
      ranges[c].push_back({0, chunks_[c].store().flat_numel()});
  }
  fp8_params_->cast(ranges, grad_sync_->shard_group());
}

tensor::const_tensor_view stage_engine::weight_bytes(std::size_t c, const model::parameter& p) {
  if (fp8_params_ && p.fp8_gemm)
    for (const auto& w : fp8_params_->weights(c))
      if (w.offset == p.offset)
        return {fp8_params_->bytes(c) + w.byte_offset, {static_cast<std::int64_t>(w.numel)}, tensor::dtype::float8_e4m3};
  return p.value;
}

double stage_engine::params_norm() {
  const tensor::default_device_scope on_device(device_);
  sync_params();
  const trace_recorder::scope traced(trace_, "params norm", "optimizer");
  return model::params_norm(optimizer_->params(), [this](std::span<double> v) { reduce_stats(v); });
}
}  // namespace mactor::training

// The cost model: compute time from Megatron's own FLOPs formula at a share of the peak, the
// tensor- and context-parallel collectives of each layer, the data-parallel gradient sync of each
// chunk and the pipeline's point-to-point transfers, all on the links the groups' placement gives.
#include "simulate/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "config/data_parallel_sharding.hpp"
#include "config/pipeline_split.hpp"
#include "simulate/hybrid_layers.hpp"
#include "simulate/layer_kinds.hpp"
#include "simulate/layer_time.hpp"
#include "simulate/rank_skew.hpp"
#include "training/flops.hpp"

namespace mactor::simulate {
namespace {

// Layers of a chunk whose forward runs again in the backward under full recompute.
int recomputed_layers(const config::megatron_args& a, int layers) {
  const auto& t = a.training;
  if (t.recompute_granularity != "full") return 0;
  if (t.recompute_method == "block") return std::min<int>(layers, static_cast<int>(t.recompute_num_layers.value_or(0)));
  return layers;
}

}  // namespace

double layer_activation_bytes(const config::megatron_args& a, bool recomputed) {
  const dims d = dims_of(a);
  const double sbh = d.s / d.cp * d.b * d.h;
  if (recomputed) return sbh * d.act_bytes / (d.sp ? d.tp : 1);  // the layer's input only
  // Table 2 of Korthikanti et al.: 34 sbh with sequence parallelism for ffn = 4h, less the
  // 5 a s / h attention-score term that flash attention and selective recompute remove.
  double bytes = d.sp ? sbh * (18 + 4 * d.ffn / d.h) / d.tp : sbh * (10 + (8 + 4 * d.ffn / d.h) / d.tp);
  const bool scores_kept = a.training.recompute_granularity != "selective" &&
                           (a.network_size.attention_backend == "unfused" || a.network_size.attention_backend == "local");
  if (scores_kept) bytes += 5 * d.heads * d.s * sbh / d.h / d.tp;
  return bytes;
}

std::vector<std::string> unsupported_flags(const config::megatron_args& a) {
  std::vector<std::string> out;
  auto refuse = [&](bool set, const char* what, const char* fix) {
    if (set) out.push_back(std::string(what) + " is not modelled by mactor simulate yet; " + fix);
  };
  refuse(!is_hybrid(a) && a.experimental.hybrid_override_pattern.has_value(),
         "--hybrid-override-pattern without --is-hybrid-model (Megatron's FLOPs formula would count a dense model)",
         "add --is-hybrid-model");
  if (is_hybrid(a)) {
    const auto& d = a.distributed;
    refuse(a.moe.num_experts.has_value(), "--num-experts with a hybrid model", "drop --num-experts");
    refuse(a.network_size.multi_latent_attention, "--multi-latent-attention with a hybrid model",
           "drop --multi-latent-attention");
    refuse(a.network_size.mtp_num_layers.value_or(0) > 0, "--mtp-num-layers with a hybrid model", "drop --mtp-num-layers");
    refuse(a.derived.virtual_pipeline_model_parallel_size.value_or(1) > 1, "virtual pipeline stages with a hybrid model",
           "drop the virtual-stage flags");
    refuse(d.decoder_first_pipeline_num_layers || d.decoder_last_pipeline_num_layers || d.pipeline_model_parallel_layout ||
               d.account_for_embedding_in_pipeline_split || d.account_for_loss_in_pipeline_split,
           "an uneven pipeline split with a hybrid model", "split the layers evenly over the pipeline stages");
    if (const std::string mismatch = mamba_context_parallel_mismatch(a); !mismatch.empty())
      out.push_back(mismatch + "; choose a --context-parallel-size that fits them");
  }
  return out;
}

namespace {


// A MoE layer's activations: the attention's and the shared expert's as a dense layer with that
// MLP width, plus the routed rows.
double moe_layer_activation_bytes(const config::megatron_args& a) {
  config::megatron_args shared = a;
  shared.network_size.ffn_hidden_size = a.moe.moe_shared_expert_intermediate_size.value_or(0);
  return layer_activation_bytes(shared, false) + moe_mlp_activation_bytes(a);
}

// `layer_bytes`: what the span's decoder layers keep when none is recomputed, summed.
void add_memory(chunk_cost& c, const config::megatron_args& a, const config::pipeline_stage_span& span, double layer_bytes,
                int mtp, int recomputed, std::int64_t padded_vocab) {
  const dims d = dims_of(a);
  const double per_layer = span.layers() ? layer_bytes / span.layers() : 0;
  const double mtp_layer = mtp_depth_is_moe(a) ? moe_layer_activation_bytes(a) : layer_activation_bytes(a, false);
  const int stored_full = span.layers() - recomputed;
  const bool uniform = a.training.recompute_method != "block";
  const double per_group = static_cast<double>(a.training.recompute_num_layers.value_or(1));
  const double stored_inputs = uniform && recomputed ? std::ceil(recomputed / per_group) : recomputed;
  const double logits = 4 * d.s / d.cp * d.b * static_cast<double>(padded_vocab) / d.tp;
  c.activation_bytes = stored_full * per_layer + stored_inputs * layer_activation_bytes(a, true) + mtp * mtp_layer +
                       (span.embedding ? (8 * d.s / d.cp * d.b + d.s / d.cp * d.b * d.h) / d.tp : 0);
  const double regrouped = recomputed ? std::min<double>(recomputed, uniform ? per_group : 1) : 0;
  c.backward_transient_bytes = regrouped * per_layer + (span.loss ? logits * (1 + mtp) : 0);
}

// The parameters and the (unrecomputed) activation bytes of a chunk's decoder layers, summed.
struct layer_totals {
  double parameters = 0, activation_bytes = 0;
};

// A hybrid model's layers: each one block (half a transformer layer's tensor-parallel
// collectives), the attention core (and CP's ring) only in the attention layers, CP's all-to-alls
// in the Mamba layers.
layer_totals add_hybrid_layers(chunk_cost& c, const config::megatron_args& a, const system_spec& system,
                               const layer_kind_flops& flops, const layer_kind_counts& n, double rate, double share) {
  const bool selective = a.training.recompute_granularity == "selective";
  add_layers(c, time_of_layer(a, system, flops.mamba_layer, {false, 0.5, false, true, false}, rate), n.mamba, share,
             selective);
  add_layers(c, time_of_layer(a, system, flops.attention_layer, {false, 0.5, true, false, false}, rate), n.attention,
             share, selective);
  add_layers(c, time_of_layer(a, system, flops.mlp_layer, {false, 0.5, false}, rate), n.mlp, share, selective);
  return {n.mamba * mamba_layer_parameters(a) + n.attention * attention_only_layer_parameters(a) +
              n.mlp * mlp_only_layer_parameters(a),
          n.mamba * mamba_activation_bytes(a) + n.attention * attention_only_activation_bytes(a) +
              n.mlp * mlp_only_activation_bytes(a)};
}

// Dense and MoE layers (from --moe-layer-freq), then the MTP depths on the last stage.
layer_totals add_transformer_layers(chunk_cost& c, const config::megatron_args& a, const system_spec& system,
                                    const layer_kind_flops& flops, const layer_kind_counts& n, int mtp, double rate,
                                    double share) {
  const bool selective = a.training.recompute_granularity == "selective";
  // A MoE layer's MLP has no tensor-parallel collective of its own: the attention's half stays.
  const layer_shape moe_shape{true, 0.5, true};
  add_layers(c, time_of_layer(a, system, flops.dense_layer, {}, rate), n.dense, share, selective);
  if (n.moe) add_layers(c, time_of_layer(a, system, flops.moe_layer, moe_shape, rate), n.moe, share, selective);
  if (mtp)
    add_layers(c, time_of_layer(a, system, flops.mtp_depth, mtp_depth_is_moe(a) ? moe_shape : layer_shape{}, rate), mtp,
               0, selective);
  return {n.dense * dense_layer_parameters(a) + n.moe * moe_layer_parameters(a),
          n.dense * layer_activation_bytes(a, false) + n.moe * moe_layer_activation_bytes(a)};
}

chunk_cost chunk_of(const config::megatron_args& a, const system_spec& system, const layer_kind_flops& flops,
                    const config::pipeline_stage_span& span, double peak, std::int64_t padded_vocab) {
  const dims d = dims_of(a);
  const double rate = peak * system.compute_efficiency;
  const layer_kind_counts kinds = layer_kinds_in(a, span.layer_begin, span.layer_end);
  const int mtp = span.loss ? static_cast<int>(a.network_size.mtp_num_layers.value_or(0)) : 0;
  const int recomputed = recomputed_layers(a, span.layers());
  const double share = span.layers() ? static_cast<double>(recomputed) / span.layers() : 0;

  chunk_cost c;
  c.layers = span.layers();
  c.embedding = span.embedding;
  c.loss = span.loss;
  const layer_totals layers = is_hybrid(a) ? add_hybrid_layers(c, a, system, flops, kinds, rate, share)
                                           : add_transformer_layers(c, a, system, flops, kinds, mtp, rate, share);
  const double logits_f = span.loss ? flops.logits / (static_cast<double>(d.tp) * d.cp) / rate : 0;
  c.forward_s += logits_f;
  c.backward_s += 2 * logits_f;
  c.weight_grad_s += logits_f;

  const double vocab_params = static_cast<double>(padded_vocab) * d.h / d.tp;
  // MTP depths share the embedding: the last stage holds a copy of it unless the first stage is it.
  const bool output_copy = span.loss && (a.network_size.untie_embeddings_and_output_weights || d.pp > 1 || !span.embedding);
  const bool mtp_embedding = mtp && !span.embedding && a.network_size.untie_embeddings_and_output_weights;
  const double mtp_layer = mtp_depth_is_moe(a) ? moe_layer_parameters(a) : dense_layer_parameters(a);
  c.parameters = layers.parameters + mtp * (mtp_layer + (3 * d.h + 2 * d.h * d.h) / d.tp) + (span.embedding || mtp_embedding ? vocab_params : 0) +
                 (output_copy ? vocab_params : 0) + (span.loss ? 2 * d.h / d.tp : 0);
  c.expert_parameters = (kinds.moe + (mtp_depth_is_moe(a) ? mtp : 0)) * local_expert_parameters(a);
  add_memory(c, a, span, layers.activation_bytes, mtp, recomputed, padded_vocab);
  return c;
}

// The gradient sync of `parameters` over the data-parallel (with context-parallel) group, and the
// distributed optimizer's all-gather of the updated parameters.
// The experts' share syncs over the expert-data-parallel group instead (Megatron's expert rank
// order: expert-tensor-parallel ranks innermost, then the expert-parallel ones). FSDP's sharded
// gradients (ZeRO-2) are reduce-scattered after every backward instead, and its sharded
// parameters (ZeRO-3) gathered before every forward and backward (see add_fsdp_transfers).
void add_dp_sync(const config::megatron_args& a, const system_spec& system, chunk_cost& c) {
  const dims d = dims_of(a);
  const int ep = static_cast<int>(a.moe.expert_model_parallel_size);
  const int etp = static_cast<int>(a.moe.expert_tensor_parallel_size.value_or(d.tp));
  const double grad_bytes = a.mixed_precision.grad_reduce_in_bf16 ? 2 : 4;
  const auto plan = config::sharding_plan_of(a);
  const bool sharded_grads = plan.strategy >= config::dp_sharding::optim_grads;
  const auto sync = [&](process_group_shape group, double parameters) {
    if (!plan.shards_optimizer()) {
      c.dp_sync_s += all_reduce_seconds(system, group, parameters * grad_bytes);
      return;
    }
    if (!sharded_grads) c.dp_sync_s += all_gather_seconds(system, group, parameters * grad_bytes);  // reduce-scatter
    if (!plan.shards_params()) c.param_gather_s += all_gather_seconds(system, group, parameters * d.act_bytes);
  };
  sync({d.dp * d.cp, d.tp}, c.parameters - c.expert_parameters);
  if (c.expert_parameters > 0) sync({expert_data_parallel_size(a), ep * etp}, c.expert_parameters);
}

// FSDP's transfers inside the pipeline, per microbatch: ZeRO-3 gathers the chunk's parameters
// before each forward and each backward (without resharding after the forward, once per step,
// spread here over the microbatches), ZeRO-2 and 3 reduce-scatter each backward's gradients;
// the dense parameters over the data x context-parallel group, the experts' over the
// expert-data-parallel group (as grad_sync shards each region over its own group).
// Exposed, or with --overlap-param-gather / --overlap-grad-reduce hidden behind the chunk's
// compute as far as it goes. The gathered parameters and whole gradients are transient memory.
void add_fsdp_transfers(const config::megatron_args& a, const system_spec& system, int microbatches, chunk_cost& c) {
  const auto plan = config::sharding_plan_of(a);
  if (plan.strategy < config::dp_sharding::optim_grads) return;
  const dims d = dims_of(a);
  const process_group_shape dense{d.dp * d.cp, d.tp};
  const process_group_shape experts{expert_data_parallel_size(a),
                                    static_cast<int>(a.moe.expert_model_parallel_size *
                                                     a.moe.expert_tensor_parallel_size.value_or(d.tp))};
  const double grad_bytes = a.mixed_precision.grad_reduce_in_bf16 ? 2 : 4;
  // Each region's collective, the dense one then the experts' (one after the other, as grad_sync runs them).
  const auto per_region = [&](double bytes_per_parameter) {
    double s = all_gather_seconds(system, dense, (c.parameters - c.expert_parameters) * bytes_per_parameter);
    if (c.expert_parameters > 0) s += all_gather_seconds(system, experts, c.expert_parameters * bytes_per_parameter);
    return s;
  };
  const double scatter = per_region(grad_bytes);
  double gather_forward = 0, gather_backward = 0;
  if (plan.shards_params()) {
    const double gather = per_region(d.act_bytes);
    gather_forward = plan.reshard_after_forward ? gather : gather / std::max(1, microbatches);
    gather_backward = plan.reshard_after_forward ? gather : 0;
  }
  const auto exposed = [](double comm, double compute, bool overlapped) {
    return overlapped ? std::max(0.0, comm - compute) : comm;
  };
  const bool overlap_gather = a.distributed.overlap_param_gather, overlap_reduce = a.distributed.overlap_grad_reduce;
  c.forward_fsdp_s = exposed(gather_forward, c.forward_s, overlap_gather);
  c.backward_fsdp_s = exposed(gather_backward, c.backward_s, overlap_gather) + exposed(scatter, c.backward_s, overlap_reduce);
  c.forward_s += c.forward_fsdp_s;
  c.backward_s += c.backward_fsdp_s;
  c.backward_transient_bytes += c.parameters * (grad_bytes + (plan.shards_params() ? d.act_bytes : 0));
}

}  // namespace

cost_model build_cost_model(const config::megatron_args& a, const system_spec& system, std::int64_t padded_vocab) {
  const dims d = dims_of(a);
  cost_model m;
  m.tensor = d.tp, m.context = d.cp, m.data = d.dp, m.pipeline = d.pp;
  m.virtual_stages = static_cast<int>(a.derived.virtual_pipeline_model_parallel_size.value_or(1));
  m.padded_vocab_size = padded_vocab;
  m.peak_flops = d.act_bytes == 2 ? system.peak_flops_bf16 : system.peak_flops_fp32;
  const layer_kind_flops flops = split_layer_flops(a, padded_vocab);
  const auto split = config::split_pipeline_layers(config::pipeline_split_settings::of(a));
  const bool distributed_optimizer = config::shards_optimizer(a);
  const int microbatches = static_cast<int>(a.training.global_batch_size.value_or(1) /
                                            (a.training.micro_batch_size.value_or(1) * a.derived.data_parallel_size));
  const double optimizer_shards = distributed_optimizer ? d.dp * d.cp : 1;
  const double expert_shards = distributed_optimizer ? expert_data_parallel_size(a) : 1;
  for (const auto& rank : split.stages) {
    std::vector<chunk_cost> chunks;
    double updated = 0;  // parameters this rank's optimizer updates
    for (const auto& span : rank) {
      chunks.push_back(chunk_of(a, system, flops, span, m.peak_flops, padded_vocab));
      add_dp_sync(a, system, chunks.back());
      add_fsdp_transfers(a, system, microbatches, chunks.back());
      chunks.back().dp_sync_s += replica_wait_seconds(system, d.dp, microbatches, chunks.back());
      const auto& c = chunks.back();
      updated += (c.parameters - c.expert_parameters) / optimizer_shards + c.expert_parameters / expert_shards;
    }
    // Adam reads and writes the fp32 main parameter, both moments and the gradient (~36 B/param).
    m.optimizer_s.push_back(updated * 36 / system.memory_bandwidth_Bps);
    m.chunks.push_back(std::move(chunks));
  }
  m.p2p_bytes = d.b * d.s / d.cp * d.h * d.act_bytes / (d.sp ? d.tp : 1);
  m.p2p_seconds = d.pp > 1 ? transfer_seconds(ring_link(system, {2, d.tp * d.cp * d.dp}), m.p2p_bytes) : 0;
  m.model_flops_per_iteration =
      training::num_floating_point_operations(a, padded_vocab, a.training.global_batch_size.value_or(1));
  if (a.training.sequence_parallel || d.tp > 1)
    m.notes.push_back("the output layer's vocab-parallel collectives are not counted");
  if (!a.tokenizer.vocab_size && !a.tokenizer.padded_vocab_size)
    m.notes.push_back("vocabulary " + std::to_string(padded_vocab) + " (GPT-2's 50257 padded; give --vocab-size for another)");
  if (a.moe.num_experts)
    m.notes.push_back("MoE routing balanced (every expert gets topk x tokens / experts), the expert-parallel "
                      "all-to-alls never overlapped with compute");
  if (a.network_size.multi_latent_attention)
    m.notes.push_back("multi-latent attention's activations counted as standard attention's");
  if (is_hybrid(a) && d.cp > 1)
    m.notes.push_back("the Mamba layers' context-parallel all-to-alls never overlapped with compute, their "
                      "whole-sequence buffers of heads / cp heads counted as the sequence shard's activations");
  if (a.transformer_engine.fp8.has_value())
    m.notes.push_back("fp8 GEMMs run at the system file's bf16 peak (it has no fp8 rate)");
  if (a.training.recompute_granularity == "selective")
    m.notes.push_back("selective recompute counted as the attention core's forward again in the backward");
  return m;
}

}  // namespace mactor::simulate

// The cost model: compute time from Megatron's own FLOPs formula at a share of the peak, the
// tensor- and context-parallel collectives of each layer, the data-parallel gradient sync of each
// chunk and the pipeline's point-to-point transfers, all on the links the groups' placement gives.
#include "simulate/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "config/pipeline_split.hpp"
#include "training/flops.hpp"

namespace mactor::simulate {
namespace {

// Per-microbatch sizes of one rank, in elements and bytes.
struct dims {
  double b, s, h, ffn, heads, groups, kv_channels;
  int tp, cp, dp, pp;
  bool sp;
  double act_bytes;  // bytes of one activation element (2 in bf16/fp16, 4 in fp32)
};

dims dims_of(const config::megatron_args& a) {
  const auto& n = a.network_size;
  dims d{};
  d.b = static_cast<double>(a.training.micro_batch_size.value_or(1));
  d.s = static_cast<double>(*a.data.seq_length);
  d.h = static_cast<double>(*n.hidden_size);
  d.ffn = static_cast<double>(n.ffn_hidden_size.value_or(4 * *n.hidden_size));
  d.heads = static_cast<double>(*n.num_attention_heads);
  d.groups = n.group_query_attention ? static_cast<double>(n.num_query_groups) : d.heads;
  d.kv_channels = static_cast<double>(n.kv_channels.value_or(*n.hidden_size / *n.num_attention_heads));
  d.tp = static_cast<int>(a.distributed.tensor_model_parallel_size);
  d.cp = static_cast<int>(a.distributed.context_parallel_size);
  d.pp = static_cast<int>(a.distributed.pipeline_model_parallel_size);
  d.dp = static_cast<int>(a.derived.data_parallel_size);
  d.sp = a.training.sequence_parallel;
  d.act_bytes = a.mixed_precision.bf16 || a.mixed_precision.fp16 ? 2 : 4;
  return d;
}

// Megatron's FLOPs formula taken apart by evaluating it with 0 and 1 layers: forward FLOPs of one
// transformer layer and of the output layer, per microbatch, over the whole (unsharded) model.
struct layer_flops {
  double layer_forward = 0;
  double logits_forward = 0;
};

layer_flops split_flops(const config::megatron_args& a, std::int64_t padded_vocab) {
  config::megatron_args one = a;
  const std::int64_t mbs = a.training.micro_batch_size.value_or(1);
  one.network_size.num_layers = 1;
  const double with_one = training::num_floating_point_operations(one, padded_vocab, mbs);
  one.network_size.num_layers = 0;
  const double with_none = training::num_floating_point_operations(one, padded_vocab, mbs);
  return {(with_one - with_none) / 3, with_none / 3};  // fwd + 2x bwd = 3x forward
}

// Layers of a chunk whose forward runs again in the backward under full recompute.
int recomputed_layers(const config::megatron_args& a, int layers) {
  const auto& t = a.training;
  if (t.recompute_granularity != "full") return 0;
  if (t.recompute_method == "block") return std::min<int>(layers, static_cast<int>(t.recompute_num_layers.value_or(0)));
  return layers;
}

// Tensor-parallel collectives of one layer in one direction: two all-reduces, or with sequence
// parallelism two all-gathers and two reduce-scatters, of the layer's full activation.
double tp_seconds_per_layer(const dims& d, const system_spec& system) {
  const double bytes = d.b * d.s / d.cp * d.h * d.act_bytes;
  const process_group_shape tp{d.tp, 1};
  return d.sp ? 4 * all_gather_seconds(system, tp, bytes) : 2 * all_reduce_seconds(system, tp, bytes);
}

// Context parallelism (ring attention, --cp-comm-type p2p): cp - 1 exchanges of the local K and V
// per layer, overlapped with the attention core; only what the core cannot hide is exposed.
double cp_exposed_forward(const dims& d, const system_spec& system, double core_attention_s) {
  if (d.cp <= 1) return 0;
  const double kv_bytes = 2 * d.b * (d.s / d.cp) * (d.groups / std::min<double>(d.groups, d.tp)) * d.kv_channels * d.act_bytes;
  const link_spec& link = ring_link(system, {d.cp, d.tp});
  const double comm = (d.cp - 1) * transfer_seconds(link, kv_bytes);
  return std::max(0.0, comm - core_attention_s);
}

}  // namespace

double layer_parameters(const config::megatron_args& a) {
  const dims d = dims_of(a);
  const double gated = a.network_size.swiglu ? 1.5 : 1.0;
  const double attention = 2 * d.h * d.h * (1 + d.groups / d.heads) * (d.kv_channels * d.heads / d.h);
  return (2 * d.h * (d.ffn * gated + 2) + attention) / d.tp;
}

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
  auto refuse = [&](bool set, const char* flag) {
    if (set) out.push_back(std::string(flag) + " is not modelled by mactor simulate yet; drop it to simulate the dense equivalent");
  };
  refuse(a.moe.num_experts.has_value(), "--num-experts (mixture of experts)");
  refuse(a.moe.expert_model_parallel_size > 1, "--expert-model-parallel-size");
  refuse(a.network_size.multi_latent_attention, "--multi-latent-attention");
  refuse(a.network_size.mtp_num_layers.has_value(), "--mtp-num-layers");
  refuse(a.distributed.use_megatron_fsdp, "--use-megatron-fsdp");
  refuse(a.distributed.use_torch_fsdp2, "--use-torch-fsdp2");
  refuse(a.experimental.is_hybrid_model || a.experimental.hybrid_override_pattern.has_value(), "--hybrid-override-pattern");
  refuse(a.distributed.cp_comm_type.size() != 1 || a.distributed.cp_comm_type.front() != "p2p", "--cp-comm-type other than p2p");
  return out;
}

namespace {

chunk_cost chunk_of(const config::megatron_args& a, const system_spec& system, const layer_flops& flops,
                    const config::pipeline_stage_span& span, double peak, std::int64_t padded_vocab) {
  const dims d = dims_of(a);
  const double shards = static_cast<double>(d.tp) * d.cp;
  const double rate = peak * system.compute_efficiency;
  const double layer_f = flops.layer_forward / shards / rate;
  const double core_attention_f = 2 * d.b * d.s * d.s * d.kv_channels * d.heads / shards / rate;
  const double tp_f = d.tp > 1 ? tp_seconds_per_layer(d, system) : 0;
  const double tp_exposed = a.training.tp_comm_overlap ? std::max(0.0, tp_f - (layer_f - core_attention_f)) : tp_f;
  const double cp_f = cp_exposed_forward(d, system, core_attention_f);
  const double cp_b = cp_exposed_forward(d, system, core_attention_f) * 2;  // K,V and their gradients
  const int recomputed = recomputed_layers(a, span.layers());
  const double selective = a.training.recompute_granularity == "selective" ? core_attention_f : 0;

  chunk_cost c;
  c.layers = span.layers();
  c.embedding = span.embedding;
  c.loss = span.loss;
  c.forward_tp_s = c.layers * tp_exposed;
  c.backward_tp_s = c.layers * tp_exposed + recomputed * tp_exposed;
  c.forward_cp_s = c.layers * cp_f;
  c.backward_cp_s = c.layers * cp_b + recomputed * cp_f;
  const double logits_f = span.loss ? flops.logits_forward / shards / rate : 0;
  c.forward_s = c.layers * layer_f + logits_f + c.forward_tp_s + c.forward_cp_s;
  c.backward_s = c.layers * (2 * layer_f + selective) + recomputed * layer_f + 2 * logits_f + c.backward_tp_s + c.backward_cp_s;
  // dW = dY^T X repeats each linear's forward GEMM; attention's core has no weights.
  c.weight_grad_s = c.layers * (layer_f - core_attention_f) + logits_f;

  const double vocab_params = static_cast<double>(padded_vocab) * d.h / d.tp;
  const bool output_copy = span.loss && (a.network_size.untie_embeddings_and_output_weights || d.pp > 1 || !span.embedding);
  c.parameters = c.layers * layer_parameters(a) + (span.embedding ? vocab_params : 0) + (output_copy ? vocab_params : 0) +
                 (span.loss ? 2 * d.h / d.tp : 0);

  const int stored_full = c.layers - recomputed;
  const bool uniform = a.training.recompute_method != "block";
  const double per_group = static_cast<double>(a.training.recompute_num_layers.value_or(1));
  const double stored_inputs = uniform && recomputed ? std::ceil(recomputed / per_group) : recomputed;
  c.activation_bytes = stored_full * layer_activation_bytes(a, false) + stored_inputs * layer_activation_bytes(a, true) +
                       (span.embedding ? (8 * d.s / d.cp * d.b + d.s / d.cp * d.b * d.h) / d.tp : 0);
  const double regrouped = recomputed ? std::min<double>(recomputed, uniform ? per_group : 1) : 0;
  c.backward_transient_bytes = regrouped * layer_activation_bytes(a, false) +
                               (span.loss ? 4 * d.s / d.cp * d.b * static_cast<double>(padded_vocab) / d.tp : 0);
  return c;
}

// The gradient sync of `parameters` over the data-parallel (with context-parallel) group, and the
// distributed optimizer's all-gather of the updated parameters.
void add_dp_sync(const config::megatron_args& a, const system_spec& system, chunk_cost& c) {
  const dims d = dims_of(a);
  const process_group_shape group{d.dp * d.cp, d.tp};
  const double grad_bytes = a.mixed_precision.grad_reduce_in_bf16 ? 2 : 4;
  const double bytes = c.parameters * grad_bytes;
  if (a.distributed.use_distributed_optimizer) {
    c.dp_sync_s = all_gather_seconds(system, group, bytes);  // reduce-scatter
    c.param_gather_s = all_gather_seconds(system, group, c.parameters * d.act_bytes);
  } else {
    c.dp_sync_s = all_reduce_seconds(system, group, bytes);
  }
}

}  // namespace

cost_model build_cost_model(const config::megatron_args& a, const system_spec& system, std::int64_t padded_vocab) {
  const dims d = dims_of(a);
  cost_model m;
  m.tensor = d.tp, m.context = d.cp, m.data = d.dp, m.pipeline = d.pp;
  m.virtual_stages = static_cast<int>(a.derived.virtual_pipeline_model_parallel_size.value_or(1));
  m.padded_vocab_size = padded_vocab;
  m.peak_flops = d.act_bytes == 2 ? system.peak_flops_bf16 : system.peak_flops_fp32;
  const layer_flops flops = split_flops(a, padded_vocab);
  const auto split = config::split_pipeline_layers(config::pipeline_split_settings::of(a));
  const double optimizer_shards = a.distributed.use_distributed_optimizer ? d.dp * d.cp : 1;
  for (const auto& rank : split.stages) {
    std::vector<chunk_cost> chunks;
    double parameters = 0;
    for (const auto& span : rank) {
      chunks.push_back(chunk_of(a, system, flops, span, m.peak_flops, padded_vocab));
      add_dp_sync(a, system, chunks.back());
      parameters += chunks.back().parameters;
    }
    // Adam reads and writes the fp32 main parameter, both moments and the gradient (~36 B/param).
    m.optimizer_s.push_back(parameters / optimizer_shards * 36 / system.memory_bandwidth_Bps);
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
  if (a.transformer_engine.fp8.has_value())
    m.notes.push_back("fp8 GEMMs run at the system file's bf16 peak (it has no fp8 rate)");
  if (a.training.recompute_granularity == "selective")
    m.notes.push_back("selective recompute counted as the attention core's forward again in the backward");
  return m;
}

}  // namespace mactor::simulate

// validate_args, first half (rules 7-28 of shared/megatron/validation.md): parallel layout, batch sizes,
// removed flags, data sources, virtual pipeline and communication overlap.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string_view>
#include <numeric>

#include <filesystem>

#include "config/pipeline_split.hpp"
#include "config/validation_context.hpp"

namespace mactor::config::detail {
namespace {

void checkpoint_format(validation_context& c) {  // rules 4, 7
  auto& ck = c.a.checkpointing;
  if (ck.non_persistent_ckpt_type && *ck.non_persistent_ckpt_type == "in_memory")
    c.error("--non-persistent-ckpt-type=in_memory is not supported by Megatron's validate_args; use global or local");
  if (c.a.training.use_legacy_models)
    c.require(ck.ckpt_format == "torch", "--use-legacy-models needs --ckpt-format=torch, got --ckpt-format=" + ck.ckpt_format);
  c.a.derived.use_dist_ckpt = ck.ckpt_format != "torch";
}

void world_size(validation_context& c) {  // rules 8, 10, 11
  const auto& d = c.a.distributed;
  const std::int64_t tp = d.tensor_model_parallel_size, pp = d.pipeline_model_parallel_size,
                     cp = d.context_parallel_size;
  const std::int64_t w = c.placement.world_size;
  c.a.derived.world_size = w;
  c.a.derived.rank = c.placement.rank;
  // Megatron's default is the WORLD_SIZE it starts in (1 as the flag table reads it). A smaller
  // value asks for spare ranks: mactor's launcher reads it, starts the others as spares and gives
  // the job this many ranks, so here it is the world size; anything else was not launched so.
  if (const auto active = c.a.inprocess_restart.inprocess_active_world_size;
      c.a.inprocess_restart.inprocess_restart && active != 1 && active != w)
    c.error("--inprocess-active-world-size " + show(active) + ": this job has " + show(w) +
            " ranks; spare ranks come from the launcher: run it under mactor -np N with N at least " + show(active) +
            " (the processes past " + show(active) + " wait as spares), or drop the flag");
  c.a.derived.transformer_pipeline_model_parallel_size = pp;
  for (auto [name, v] : {std::pair{"--tensor-model-parallel-size", tp}, {"--pipeline-model-parallel-size", pp},
                         {"--context-parallel-size", cp}})
    if (v < 1) c.error(std::string(name) + "=" + show(v) + " must be at least 1");
  if (tp < 1 || pp < 1 || cp < 1) return;
  const std::int64_t model = replica_size(c.a);
  if (w % model != 0) {
    c.error("world size " + show(w) + " is not divisible by --tensor-model-parallel-size=" + show(tp) +
            " x --pipeline-model-parallel-size=" + show(pp) + " x --context-parallel-size=" + show(cp) + " = " +
            show(model) + "\n  launch a multiple of " + show(model) + " ranks (mactor -np " + show(model) +
            "), or pick sizes whose product divides " + show(w) + ": " + divisors_text(w));
    return;
  }
  c.a.derived.data_parallel_size = w / model;
}

void attention_backend(validation_context& c) {  // rule 9
  if (c.a.network_size.attention_backend != "local") return;
  const auto& spec = c.a.experimental.spec;
  c.require(spec && !spec->empty() && spec->front() == "local",
            "--attention-backend local is only supported with --spec local");
}

void rl_step(validation_context& c) {  // rule 12
  const auto& r = c.a.rl;
  if (!r.perform_rl_step) return;
  c.require(!(r.rl_remove_kv_cache_during_training && r.rl_offload_kv_cache_during_training),
            "--rl-remove-kv-cache-during-training and --rl-offload-kv-cache-during-training cannot both be set");
  c.require(!(r.rl_partial_rollouts && r.rl_remove_kv_cache_during_training),
            "--rl-partial-rollouts cannot be combined with --rl-remove-kv-cache-during-training");
  const auto gbs = c.a.training.global_batch_size.value_or(0);
  const std::int64_t per_inference = r.grpo_prompts_per_step * r.grpo_group_size * r.grpo_iterations;
  if (gbs <= 0) return;
  if (!c.require(per_inference % gbs == 0,
                 "--grpo-group-size x --grpo-prompts-per-step x --grpo-iterations = " + show(per_inference) +
                     " must be divisible by --global-batch-size=" + show(gbs)))
    return;
  const std::int64_t iters = per_inference / gbs;
  if (const auto& e = c.a.training.exit_interval)
    c.require(*e % iters == 0, "--exit-interval=" + show(*e) + " must be a multiple of " + show(iters) +
                                   " (global batches per inference iteration)");
  if (const auto& s = c.a.checkpointing.save_interval)
    c.require(*s % iters == 0, "--save-interval=" + show(*s) + " must be a multiple of " + show(iters) +
                                   " (global batches per inference iteration)");
  if (r.rl_use_sequence_packing && c.a.data.seq_length)
    c.require(*c.a.data.seq_length <= r.rl_sequence_packing_bin_size,
              "--seq-length=" + show(*c.a.data.seq_length) + " must be <= --rl-sequence-packing-bin-size=" +
                  show(r.rl_sequence_packing_bin_size));
}

}  // namespace

void context_parallel_attention_rules(validation_context& c) {
  const auto& cp_types = c.a.distributed.cp_comm_type;
  if (c.a.distributed.context_parallel_size > 1 && cp_types.size() > 1)
    c.require(static_cast<std::int64_t>(cp_types.size()) == c.a.network_size.num_layers.value_or(0),
              "--cp-comm-type needs one entry per layer (" + show(c.a.network_size.num_layers.value_or(0)) + ") or a single entry");
  // Ulysses (a2a) gives each context-parallel rank whole query groups, a2a+p2p each rank of its
  // all-to-all group (Transformer Engine asserts both).
  const auto cp = c.a.distributed.context_parallel_size, tp = c.a.distributed.tensor_model_parallel_size;
  const auto groups_here = tp > 0 ? effective_query_groups(c.a) / tp : 0;
  const auto& levels = c.a.distributed.hierarchical_context_parallel_sizes;
  const std::int64_t a2a_ranks = levels && !levels->empty() ? levels->front() : 1;
  for (const std::string type : {"a2a", "a2a+p2p"})
    if (const auto ranks = type == "a2a" ? cp : a2a_ranks;
        cp > 1 && std::find(cp_types.begin(), cp_types.end(), type) != cp_types.end())
      c.require(groups_here % ranks == 0, "--cp-comm-type " + type + " needs the query groups per tensor-parallel rank (" +
                                              show(groups_here) + ") divisible by " +
                                              (type == "a2a" ? "--context-parallel-size=" : "the first of --hierarchical-context-parallel-sizes=") +
                                              show(ranks) + "; use --cp-comm-type p2p or allgather, or change --num-query-groups");
}

namespace {

void context_parallel(validation_context& c) {  // rules 13, 14
  const auto& d = c.a.distributed;
  if (d.hierarchical_context_parallel_sizes && !d.hierarchical_context_parallel_sizes->empty()) {
    const auto& h = *d.hierarchical_context_parallel_sizes;
    const std::int64_t prod = std::accumulate(h.begin(), h.end(), std::int64_t{1}, std::multiplies<>());
    c.require(prod == d.context_parallel_size, "the product of --hierarchical-context-parallel-sizes (" + show(prod) +
                                                   ") must equal --context-parallel-size=" + show(d.context_parallel_size));
  }
  for (const auto& t : d.cp_comm_type)
    if (t.find("a2a+p2p") != std::string::npos)
      c.require(d.hierarchical_context_parallel_sizes.has_value(),
                "--hierarchical-context-parallel-sizes must be set when a2a+p2p is used in --cp-comm-type");
  // Transformer Engine's a2a+p2p attention takes exactly the two groups [a2a, p2p].
  const auto levels = d.hierarchical_context_parallel_sizes ? d.hierarchical_context_parallel_sizes->size() : 2;
  for (const auto& t : d.cp_comm_type)
    if (t == "a2a+p2p")
      c.require(levels == 2, "--cp-comm-type a2a+p2p takes two --hierarchical-context-parallel-sizes (the all-to-all "
                             "group's and the ring's, e.g. 2 4 for --context-parallel-size 8), not " + show(std::int64_t(levels)));
  auto& etp = c.a.moe.expert_tensor_parallel_size;
  if (!etp) etp = d.tensor_model_parallel_size;
  // Megatron's get_batch_on_this_cp_rank views the sequence as 2 * cp chunks, and sequence
  // parallelism splits each rank's positions over tp: both fail on a remainder at the first batch.
  const auto cp = d.context_parallel_size;
  if (cp > 1 && c.a.data.seq_length) {
    const auto seq = *c.a.data.seq_length;
    if (c.require(seq % (2 * cp) == 0, "--seq-length=" + show(seq) + " must be divisible by 2 * --context-parallel-size=" +
                                           show(2 * cp) + ": each context-parallel rank holds 2 of the sequence's 2 * cp chunks"))
      c.require(!c.a.training.sequence_parallel || (seq / cp) % d.tensor_model_parallel_size == 0,
                "--seq-length / --context-parallel-size=" + show(seq / cp) + " must be divisible by --tensor-model-parallel-size=" +
                    show(d.tensor_model_parallel_size) + " with --sequence-parallel");
  }
}

void removed_flags(validation_context& c) {  // rule 15
  c.require(!c.a.training.batch_size, "--batch-size argument is no longer valid, use --micro-batch-size instead");
  c.require(!c.a.learning_rate.warmup, "--warmup argument is no longer valid, use --lr-warmup-fraction instead");
  c.require(!c.a.distributed.model_parallel_size,
            "--model-parallel-size is no longer valid, use --tensor-model-parallel-size instead");
  c.require(!c.a.training.checkpoint_activations,
            "--checkpoint-activations is no longer valid, use --recompute-activations, or, for more control, "
            "--recompute-granularity and --recompute-method");
  if (c.a.training.recompute_activations) c.a.training.recompute_granularity = "selective";
  if (c.a.checkpointing.use_dist_ckpt_deprecated)
    c.warn("--use-dist-ckpt is deprecated and has no effect. Use --ckpt-format to select the checkpoint format.");
  if (c.a.checkpointing.dist_ckpt_format_deprecated)
    c.warn("--dist-ckpt-format is deprecated and has no effect. Use --ckpt-format to select the checkpoint format.");
  auto& ck = c.a.checkpointing;
  if (ck.ckpt_convert_format) {  // Megatron's initialize_megatron
    c.require(ck.ckpt_convert_save.has_value(), "--ckpt-convert-format needs --ckpt-convert-save (where the converted checkpoint goes)");
    c.require(ck.load.has_value(), "--ckpt-convert-format needs --load (the checkpoint to convert)");
    ck.exit_on_missing_checkpoint = true;
    // Megatron points --save there at the conversion; here from the start, so every rank has its
    // checkpoint writer (the job saves once, then exits).
    if (ck.ckpt_convert_save) {
      ck.save = (std::filesystem::path(*ck.ckpt_convert_save) / *ck.ckpt_convert_format).string();
      if (ck.save_interval.value_or(0) <= 0) ck.save_interval = 1;  // (no training step runs)
    }
  }
  const auto& l = c.a.logging;
  if (!l.wandb_project.empty()) {  // Megatron's _set_wandb_writer
    c.require(!l.wandb_exp_name.empty(), "Please specify the wandb experiment name! (--wandb-exp-name with --wandb-project)");
    c.require(!l.wandb_save_dir.empty() || c.a.checkpointing.save.has_value(),
              "--wandb-project needs --wandb-save-dir or --save (W&B's files go to <save>/wandb)");
  }
  if (const auto n = c.a.distributed.ddp_num_buckets) {
    c.require(!c.a.distributed.ddp_bucket_size, "Cannot specify both --ddp-num-buckets and --ddp-bucket-size; give one");
    c.require(*n > 0, "--ddp-num-buckets must be greater than 0");
  }
}

void cuda_graph_flags(validation_context& c) {  // rule 16
  auto& i = c.a.inference;
  if (!i.enable_cuda_graph && !i.external_cuda_graph) return;
  c.require(i.cuda_graph_impl == "none", "do not use --enable-cuda-graph or --external-cuda-graph with --cuda-graph-impl");
  c.require(!(i.enable_cuda_graph && i.external_cuda_graph),
            "--enable-cuda-graph and --external-cuda-graph cannot be enabled at the same time");
  if (i.enable_cuda_graph) {
    c.warn("--enable-cuda-graph is deprecated, use --cuda-graph-impl=local instead.");
    i.cuda_graph_impl = "local";
  } else {
    c.warn("--external-cuda-graph is deprecated, use --cuda-graph-impl=transformer_engine instead.");
    i.cuda_graph_impl = "transformer_engine";
  }
  i.enable_cuda_graph = i.external_cuda_graph = false;  // validate_args deletes them
}

void script_defaults(validation_context& c) {  // rule 17, with pretrain_gpt.py's args_defaults
  auto& t = c.a.tokenizer.tokenizer_type;
  if (!t) t = "GPT2BPETokenizer";
}

void data_sources(validation_context& c) {  // rules 18, 19
  auto& d = c.a.data;
  if (d.data_path && !d.split) {
    d.split = "969, 30, 1";
    c.warn("Please specify --split when using --data-path. Using legacy default value of \"969, 30, 1\"");
  }
  c.require(!(d.data_path && d.data_args_path), "--data-path and --data-args-path are mutually exclusive; give one");
  const bool per_split = d.train_data_path || d.valid_data_path || d.test_data_path;
  c.require(!(per_split && d.per_split_data_args_path),
            "--train/valid/test-data-path and --per-split-data-args-path are mutually exclusive; give one");
}

void batch_sizes(validation_context& c) {  // rule 20
  auto& t = c.a.training;
  if (!c.require(t.micro_batch_size.has_value(), "--micro-batch-size is required (e.g. --micro-batch-size 1)")) return;
  if (!c.require(*t.micro_batch_size > 0, "--micro-batch-size=" + show(*t.micro_batch_size) + " must be > 0")) return;
  if (!t.global_batch_size) {
    t.global_batch_size = *t.micro_batch_size * c.a.derived.data_parallel_size;
    c.notice("setting global batch size to " + show(*t.global_batch_size));
  }
  c.require(*t.global_batch_size > 0, "--global-batch-size=" + show(*t.global_batch_size) + " must be > 0");
}

std::int64_t layers_for_split(const megatron_args& a) {
  std::int64_t n = a.network_size.num_layers.value_or(a.network_size.decoder_num_layers.value_or(0));
  if (a.distributed.account_for_embedding_in_pipeline_split) ++n;
  if (a.distributed.account_for_loss_in_pipeline_split) ++n;
  return n;
}

void virtual_pipeline(validation_context& c) {  // rules 21-24
  const auto& d = c.a.distributed;
  auto& vp = c.a.derived.virtual_pipeline_model_parallel_size;
  const std::int64_t pp = d.pipeline_model_parallel_size;
  const int given = int(d.num_layers_per_virtual_pipeline_stage.has_value()) +
                    int(d.num_virtual_stages_per_pipeline_rank.has_value()) + int(d.pipeline_model_parallel_layout.has_value());
  if (!c.require(given <= 1, "no more than one of --num-layers-per-virtual-pipeline-stage, "
                             "--num-virtual-stages-per-pipeline-rank and --pipeline-model-parallel-layout can be set"))
    return;
  if (pp < 1) return;
  if (d.pipeline_model_parallel_layout) {
    std::int64_t stages = 0;
    try {
      stages = std::int64_t(parse_pipeline_layout(*d.pipeline_model_parallel_layout).size());
    } catch (const std::invalid_argument& e) {
      c.error(e.what());
      return;
    }
    if (!c.require(stages % pp == 0, "--pipeline-model-parallel-layout has " + show(stages) +
                                         " stages, which is not divisible by --pipeline-model-parallel-size=" + show(pp)))
      return;
    vp = stages / pp;
  } else if (d.num_virtual_stages_per_pipeline_rank) {
    vp = *d.num_virtual_stages_per_pipeline_rank;
  } else if (const auto& k = d.num_layers_per_virtual_pipeline_stage) {
    c.require(!d.decoder_first_pipeline_num_layers && !d.decoder_last_pipeline_num_layers,
              "please use --num-virtual-stages-per-pipeline-rank to specify virtual pipeline parallel degree when "
              "enable uneven pipeline parallelism");
    const std::int64_t layers = layers_for_split(c.a);
    if (!c.require(layers % pp == 0, "number of layers (" + show(layers) + ") must be divisible by "
                                     "--pipeline-model-parallel-size=" + show(pp) + "; try " + divisors_text(layers)))
      return;
    const std::int64_t per_stage = layers / pp;
    if (!c.require(*k > 0 && per_stage % *k == 0,
                   "number of layers per pipeline stage (" + show(per_stage) +
                       ") must be divisible by --num-layers-per-virtual-pipeline-stage=" + show(*k) + "; try " +
                       divisors_text(per_stage)))
      return;
    vp = per_stage / *k;
  } else if (!d.decoder_first_pipeline_num_layers && !d.decoder_last_pipeline_num_layers &&
             (c.a.network_size.num_layers || c.a.network_size.decoder_num_layers)) {
    const std::int64_t layers = layers_for_split(c.a);
    c.require(layers % pp == 0, "number of layers (" + show(layers) + ") is not divisible by "
                                "--pipeline-model-parallel-size=" + show(pp) + "; try " + divisors_text(layers));
  }
  if (vp && *vp == 1) vp.reset();
}

void pipeline_overlap(validation_context& c) {  // rules 25, 26, 28
  auto& d = c.a.distributed;
  const auto& vp = c.a.derived.virtual_pipeline_model_parallel_size;
  if (vp) {
    if (d.overlap_p2p_comm)
      c.require(d.pipeline_model_parallel_size > 1,
                "when interleaved schedule is used, pipeline-model-parallel size should be greater than 1 "
                "(--pipeline-model-parallel-size=" + show(d.pipeline_model_parallel_size) + ")");
    else
      c.require(d.pipeline_model_parallel_size > 2,
                "when interleaved schedule is used and p2p communication overlap is disabled, "
                "pipeline-model-parallel size should be greater than 2 (--pipeline-model-parallel-size=" +
                    show(d.pipeline_model_parallel_size) + ")");
  } else {
    d.overlap_p2p_comm = false;
    d.align_param_gather = false;
  }
  if (d.overlap_param_gather) {
    c.require(d.use_distributed_optimizer || d.use_megatron_fsdp,
              "--overlap-param-gather only supported with distributed optimizer or megatron fsdp; add "
              "--use-distributed-optimizer");
    c.require(d.overlap_grad_reduce, "must use --overlap-param-gather with --overlap-grad-reduce");
    c.require(!c.a.training.use_legacy_models, "--overlap-param-gather only supported with MCore models");
  }
  if (d.overlap_param_gather_with_optimizer_step) {
    c.require(d.use_distributed_optimizer, "--overlap-param-gather-with-optimizer-step only supported with distributed optimizer");
    c.require(d.overlap_param_gather, "must use --overlap-param-gather-with-optimizer-step with --overlap-param-gather");
    c.require(vp.has_value(), "--overlap-param-gather-with-optimizer-step only supported with interleaved pipeline parallelism");
    c.require(!c.a.derived.use_dist_ckpt, "--overlap-param-gather-with-optimizer-step not supported with distributed checkpointing yet");
  }
}

// Megatron's DistributedDataParallel asserts this when it builds its buffers.
void gradient_reduction(validation_context& c) {
  if (c.a.distributed.ddp_average_in_collective && c.a.training.calculate_per_token_loss)
    c.error("--ddp-average-in-collective cannot be combined with --calculate-per-token-loss (Megatron: 'Cannot average in "
            "collective when calculating per-token loss!'); drop one of them");
}

void torch_fsdp2(validation_context& c) {  // rule 27
  const auto& d = c.a.distributed;
  if (!d.use_torch_fsdp2) return;
  c.require(d.pipeline_model_parallel_size == 1, "--use-torch-fsdp2 is not supported with pipeline parallelism");
  c.require(c.a.moe.expert_model_parallel_size == 1, "--use-torch-fsdp2 is not supported with expert parallelism");
  c.require(!d.use_distributed_optimizer, "--use-torch-fsdp2 is not supported with --use-distributed-optimizer");
  c.require(!c.a.training.gradient_accumulation_fusion,
            "--use-torch-fsdp2 is not supported with gradient accumulation fusion; add --no-gradient-accumulation-fusion");
  const auto& f = c.a.checkpointing.ckpt_format;
  c.require(f == "torch_dist" || f == "torch_dcp", "--use-torch-fsdp2 requires --ckpt-format torch_dist or torch_dcp");
  c.require(c.a.network_size.untie_embeddings_and_output_weights,
            "--use-torch-fsdp2 requires --untie-embeddings-and-output-weights");
  c.require(!c.a.mixed_precision.fp16, "--use-torch-fsdp2 is not supported with --fp16");
  require_fsdp_cuda_connections(c);
}

}  // namespace

void require_fsdp_cuda_connections(validation_context& c) {
  const char* v = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  c.require(!v || std::string_view(v) != "1",
            "FSDP always requires CUDA_DEVICE_MAX_CONNECTIONS larger than one (unset it or set it to e.g. 8)");
}

void validate_parallel_layout(validation_context& c) {
  checkpoint_format(c);
  world_size(c);
  attention_backend(c);
  rl_step(c);
  context_parallel(c);
  removed_flags(c);
  cuda_graph_flags(c);
  script_defaults(c);
  data_sources(c);
  batch_sizes(c);
  virtual_pipeline(c);
  pipeline_overlap(c);
  gradient_reduction(c);
  torch_fsdp2(c);
}

}  // namespace mactor::config::detail

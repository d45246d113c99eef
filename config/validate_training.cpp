// validate_args, second half (rules 29-81 of shared/megatron/validation.md): precision, training length,
// model shape, sequence length, checkpointing, fusions, recompute, MoE and feature combinations.
#include <cstdlib>

#include "config/config_json.hpp"
#include "config/rerun_tracker_skips.hpp"
#include "config/validation_context.hpp"

namespace mactor::config::detail {
namespace {

std::string torch_dtype(const std::string& s) {  // rule 29
  if (s == "fp32") return "float32";
  if (s == "bf16") return "bfloat16";
  if (s == "fp16") return "float16";
  if (s == "fp8") return "uint8";
  return s;
}

// Megatron-Core's OptimizerConfig.__post_init__ (run when the optimizer is built; checked here
// with the flags' own spellings, before rule 29 maps them to torch dtypes).
void precision_aware_optimizer(validation_context& c) {
  const auto& e = c.a.experimental;
  if (e.use_precision_aware_optimizer) {
    c.require(c.a.training.optimizer == "adam", "--use-precision-aware-optimizer is only supported with --optimizer adam "
              "(got " + c.a.training.optimizer + "); use --optimizer adam or drop --use-precision-aware-optimizer");
    c.require(c.a.distributed.use_distributed_optimizer, "--use-precision-aware-optimizer is only supported with the "
              "distributed optimizer; add --use-distributed-optimizer");
    return;
  }
  const std::pair<const char*, const std::string*> dtypes[] = {{"--main-grads-dtype", &e.main_grads_dtype},
                                                               {"--main-params-dtype", &e.main_params_dtype},
                                                               {"--exp-avg-dtype", &e.exp_avg_dtype},
                                                               {"--exp-avg-sq-dtype", &e.exp_avg_sq_dtype}};
  for (const auto& [flag, value] : dtypes)
    c.require(torch_dtype(*value) == "float32", std::string(flag) + " " + *value + " can only be fp32 without the precision-aware "
              "optimizer; add --use-precision-aware-optimizer (with --use-distributed-optimizer) or drop " + flag);
}

void precision(validation_context& c) {  // rules 29-34
  auto& e = c.a.experimental;
  auto& m = c.a.mixed_precision;
  auto& te = c.a.transformer_engine;
  const auto& d = c.a.distributed;
  const std::string main_grads = e.main_grads_dtype;
  precision_aware_optimizer(c);
  for (auto* s : {&e.main_grads_dtype, &e.main_params_dtype, &e.exp_avg_dtype, &e.exp_avg_sq_dtype}) *s = torch_dtype(*s);
  if (te.fp8_param_gather)
    c.require(d.use_distributed_optimizer || d.use_torch_fsdp2 || d.use_megatron_fsdp,
              "--fp8-param-gather is only supported with --use-distributed-optimizer, torch FSDP2 or megatron FSDP");
  if (te.fp4 && te.fp8) c.error("--fp4-format and --fp8-format cannot be used simultaneously; choose one");
  if (te.fp4_param && !te.fp4) c.error("--fp4-param-gather requires --fp4-format to be specified");
  if (d.use_megatron_fsdp) {
    if (d.data_parallel_sharding_strategy == "optim_grads_params")
      c.require(!c.a.training.check_weight_hash_across_dp_replicas_interval,
                "--check-weight-hash-across-dp-replicas-interval is not supported with --data-parallel-sharding-strategy "
                "optim_grads_params (each replica holds only its shard of the weights); drop one of them");
    require_fsdp_cuda_connections(c);
    c.require(c.a.checkpointing.ckpt_format == "fsdp_dtensor",
              "--use-megatron-fsdp requires --ckpt-format fsdp_dtensor (got " + c.a.checkpointing.ckpt_format + ")");
  }
  // Only Megatron FSDP initializes meta-device parameters (module by module, into its shards);
  // everywhere else Megatron materializes them with torch's to_empty, uninitialized.
  if (d.init_model_with_meta_device && !d.use_megatron_fsdp)
    c.require(c.a.checkpointing.load.has_value(),
              "--init-model-with-meta-device without --use-megatron-fsdp leaves the parameters uninitialized (Megatron "
              "materializes them with torch's to_empty): add --use-megatron-fsdp, or give --load so that a checkpoint "
              "fills them");
  // Megatron's --no-initialization leaves the weights as torch.empty made them, for a checkpoint to fill.
  c.require(c.a.checkpointing.perform_initialization || c.a.checkpointing.load || c.a.checkpointing.pretrained_checkpoint,
            "--no-initialization leaves the weights uninitialized for a checkpoint to fill: give --load (or "
            "--pretrained-checkpoint), or drop --no-initialization");
  c.a.derived.params_dtype = "float32";
  if (m.fp16) {
    c.require(!m.bf16, "--fp16 and --bf16 cannot both be set");
    c.a.derived.params_dtype = "float16";
    if (!m.loss_scale) c.a.training.check_for_nan_in_loss_and_grad = false;
  }
  if (m.bf16) {
    c.a.derived.params_dtype = "bfloat16";
    if (m.accumulate_allreduce_grads_in_fp32)
      c.require(main_grads == "fp32", "--accumulate-allreduce-grads-in-fp32 requires --main-grads-dtype fp32 (got " +
                main_grads + "); drop one of the two");
    if (m.grad_reduce_in_bf16) m.accumulate_allreduce_grads_in_fp32 = false;
    else if (main_grads == "fp32") m.accumulate_allreduce_grads_in_fp32 = true;
  }
  const auto& i = c.a.inference;
  if (i.cuda_graph_impl == "local" && i.cuda_graph_scope == "full_iteration") {
    if (!i.inference_dynamic_batching)
      c.require(!c.a.training.check_for_nan_in_loss_and_grad,
                "full-iteration CUDA graphs need --no-check-for-nan-in-loss-and-grad");
    else
      c.require(!te.fp8, "full-iteration CUDA graphs with dynamic batching do not support --fp8-format");
  }
}

void data_loader(validation_context& c) {  // rules 35, 36
  auto& t = c.a.training;
  if (!t.dataloader_type) t.dataloader_type = "single";
  c.require(c.a.data.num_dataset_builder_threads > 0,
            "--num-dataset-builder-threads=" + show(c.a.data.num_dataset_builder_threads) + " must be > 0");
  c.a.derived.consumed_train_samples = c.a.derived.skipped_train_samples = c.a.derived.consumed_valid_samples = 0;
  c.a.derived.variable_seq_lengths = false;
  // Megatron refuses this as it builds the validation loaders (NotImplementedError); found here, at start.
  const auto& v = c.a.validation;
  if (v.multiple_validation_sets && !v.full_validation && !v.skip_train)
    c.error("--multiple-validation-sets currently requires --full-validation (each set is evaluated whole); add "
            "--full-validation");
}

void training_length(validation_context& c) {  // rules 37, 38
  const auto& t = c.a.training;
  const auto& lr = c.a.learning_rate;
  if (t.train_iters) {
    c.require(!t.train_samples, "--train-iters and --train-samples cannot both be set; give one");
    c.require(!lr.lr_decay_samples, "with --train-iters, use --lr-decay-iters rather than --lr-decay-samples");
    c.require(!t.rampup_batch_size, "--rampup-batch-size is only supported with sample-based training (--train-samples)");
    c.require(lr.lr_warmup_samples == 0, "with --train-iters, use --lr-warmup-iters rather than --lr-warmup-samples");
    if (lr.lr_warmup_fraction)
      c.require(lr.lr_warmup_iters == 0, "can only specify one of --lr-warmup-fraction and --lr-warmup-iters");
  }
  if (t.train_samples) {
    c.require(!lr.lr_decay_iters, "with --train-samples, use --lr-decay-samples rather than --lr-decay-iters");
    c.require(lr.lr_warmup_iters == 0, "with --train-samples, use --lr-warmup-samples rather than --lr-warmup-iters");
    if (lr.lr_warmup_fraction)
      c.require(lr.lr_warmup_samples == 0, "can only specify one of --lr-warmup-fraction and --lr-warmup-samples");
  }
}

void model_shape(validation_context& c) {  // rules 39-42
  auto& n = c.a.network_size;
  if (n.num_layers) {
    c.require(!n.encoder_num_layers, "cannot have both --num-layers and --encoder-num-layers; give --num-layers");
    n.encoder_num_layers = n.num_layers;
  } else if (c.require(n.encoder_num_layers.has_value(), "--num-layers is required (e.g. --num-layers 12)")) {
    n.num_layers = n.encoder_num_layers;
  }
  c.require(n.hidden_size.has_value(), "--hidden-size is required (e.g. --hidden-size 768)");
  c.require(n.num_attention_heads.has_value(), "--num-attention-heads is required (e.g. --num-attention-heads 12)");
  c.require(n.max_position_embeddings.has_value(),
            "--max-position-embeddings is required (at least --seq-length, e.g. --max-position-embeddings 1024)");
  if (!n.hidden_size) return;
  const std::int64_t h = *n.hidden_size;
  if (!n.ffn_hidden_size)
    n.ffn_hidden_size = n.swiglu ? static_cast<std::int64_t>((4.0 * h * 2.0 / 3.0) / 64.0) * 64 : 4 * h;
  if (!n.kv_channels && n.num_attention_heads) {
    const std::int64_t heads = *n.num_attention_heads;
    if (c.require(heads > 0 && h % heads == 0, "--hidden-size=" + show(h) + " is not divisible by --num-attention-heads=" +
                                                   show(heads) + "; choose heads among " + divisors_text(h) +
                                                   ", or set --kv-channels"))
      n.kv_channels = h / heads;
  }
}

void sequence_length(validation_context& c) {  // rules 43-45
  auto& d = c.a.data;
  const std::int64_t cp = c.a.distributed.context_parallel_size;
  if (cp > 1 && d.seq_length)
    c.require(*d.seq_length % (2 * cp) == 0, "--seq-length=" + show(*d.seq_length) + " must be divisible by 2 x "
                                             "--context-parallel-size=" + show(2 * cp) + " for load balancing");
  if (d.seq_length) {
    c.require(!d.encoder_seq_length, "cannot have both --seq-length and --encoder-seq-length; give --seq-length");
    d.encoder_seq_length = d.seq_length;
  } else if (c.require(d.encoder_seq_length.has_value(), "--seq-length is required (e.g. --seq-length 1024)")) {
    d.seq_length = d.encoder_seq_length;
  }
  const auto& mpe = c.a.network_size.max_position_embeddings;
  if (mpe && d.seq_length)
    c.require(*mpe >= *d.seq_length, "--max-position-embeddings=" + show(*mpe) + " must be >= --seq-length=" +
                                         show(*d.seq_length) + "; raise it to at least " + show(*d.seq_length));
  if (mpe && d.decoder_seq_length)
    c.require(*mpe >= *d.decoder_seq_length, "--max-position-embeddings=" + show(*mpe) + " must be >= --decoder-seq-length=" +
                                                 show(*d.decoder_seq_length));
}

void lr_and_save(validation_context& c) {  // rules 46, 47
  const auto& lr = c.a.learning_rate;
  if (lr.lr) c.require(lr.min_lr <= *lr.lr, "--min-lr=" + show(lr.min_lr) + " must be <= --lr=" + show(*lr.lr));
  const auto& ck = c.a.checkpointing;
  if (!ck.save) return;
  if (c.require(ck.save_interval.has_value() && *ck.save_interval > 0,
                "--save needs --save-interval > 0 (e.g. --save-interval 1000)") &&
      ck.save_retain_interval)
    c.require(*ck.save_retain_interval > 0 && *ck.save_retain_interval % *ck.save_interval == 0,
              "--save-retain-interval=" + show(*ck.save_retain_interval) + " must be a positive multiple of --save-interval=" +
                  show(*ck.save_interval));
}

void mixed_precision_features(validation_context& c) {  // rules 48-50
  const auto& m = c.a.mixed_precision;
  if (m.fp16_lm_cross_entropy) c.require(m.fp16, "lm cross entropy in fp16 only support in fp16 model; add --fp16");
  if (m.fp32_residual_connection)
    c.require(m.fp16 || m.bf16, "residual connection in fp32 only supported when using fp16 or bf16");
  if (c.a.moe.moe_grouped_gemm)
    c.require(m.bf16, "currently GroupedGEMM for MoE only supports bf16 dtype; add --bf16");
  auto& r = c.a.regularization;
  if (r.weight_decay_incr_style == "constant") {
    c.require(!r.start_weight_decay && !r.end_weight_decay,
              "--start-weight-decay/--end-weight-decay need --weight-decay-incr-style linear or cosine");
    r.start_weight_decay = r.end_weight_decay = r.weight_decay;
  } else {
    c.require(r.start_weight_decay.has_value() && r.end_weight_decay.has_value(),
              "--weight-decay-incr-style " + r.weight_decay_incr_style + " needs --start-weight-decay and --end-weight-decay");
  }
}

void recompute_and_sequence_parallel(validation_context& c) {  // rules 52-54
  auto& t = c.a.training;
  if (t.distribute_saved_activations) {
    c.require(c.a.distributed.tensor_model_parallel_size > 1,
              "can distribute recomputed activations only across tensor model parallel groups (--tensor-model-parallel-size > 1)");
    c.require(t.recompute_granularity == "full", "distributed recompute activations is only application to full recompute "
                                                 "granularity; add --recompute-granularity full");
    c.require(t.recompute_method.has_value(), "for distributed recompute activations to work, --recompute-method must be set");
  }
  if (t.recompute_granularity == "selective")
    c.require(!t.recompute_method, "recompute method is not yet supported for selective recomputing granularity; "
                                   "drop --recompute-method");
  if (c.a.distributed.tensor_model_parallel_size == 1) {
    if (t.sequence_parallel) c.warn("Disabling sequence parallelism because tensor model parallelism is disabled");
    t.sequence_parallel = false;
  }
  // Megatron splits the [seq, batch, hidden] activations along seq over the tp ranks and asserts
  // "First dimension of the tensor should be divisible by tensor parallel size" at the first step.
  const auto tp = c.a.distributed.tensor_model_parallel_size;
  if (t.sequence_parallel && c.a.data.seq_length)
    c.require(*c.a.data.seq_length % tp == 0,
              "--seq-length=" + show(*c.a.data.seq_length) + " is not divisible by --tensor-model-parallel-size=" +
                  show(tp) + " with --sequence-parallel: each tensor-parallel rank holds seq_length / tp positions; "
                  "choose a multiple of " + show(tp) + " or drop --sequence-parallel");
  if (t.tp_comm_overlap)
    c.require(t.sequence_parallel, "tensor parallel communication/GEMM overlap can happen only when sequence parallelism "
                                   "is enabled; add --sequence-parallel");
}

void fusions_and_embeddings(validation_context& c) {  // rules 57-62
  auto& t = c.a.training;
  auto& n = c.a.network_size;
  if (!t.add_bias_linear) t.bias_gelu_fusion = false;
  if (t.add_bias_linear) t.add_qkv_bias = true;
  if (c.a.retro.retro_add_retriever) {
    c.require(!t.sequence_parallel, "retro currently does not support sequence parallelism");
    c.require(c.a.distributed.pipeline_model_parallel_size == 1, "retro currently does not support pipeline parallelism");
  }
  if (c.a.learning_rate.decoupled_lr || c.a.learning_rate.decoupled_min_lr)
    c.require(!t.use_legacy_models, "--decoupled-lr and --decoupled-min-lr are not supported in legacy models");
  if (n.use_rotary_position_embeddings) n.position_embedding_type = "rope";
  if (n.rotary_interleaved && t.use_legacy_models) c.error("--rotary-interleaved is not supported in legacy models");
  if (n.position_embedding_type != "rope") t.apply_rope_fusion = false;
  if (!n.add_position_embedding && n.position_embedding_type != "rope")
    c.error("--no-position-embedding is deprecated, use --position-embedding-type (e.g. rope)");
  if (n.position_embedding_type == "relative")
    c.require(c.a.transformer_engine.transformer_impl == "transformer_engine",
              "--position-embedding-type relative is only supported with --transformer-impl transformer_engine");
  if (n.position_embedding_type == "mrope") c.require(n.mrope_section.has_value(), "--position-embedding-type mrope needs --mrope-section");
}

void experts(validation_context& c) {  // rules 63, 65, 66
  auto& moe = c.a.moe;
  if (moe.num_experts && *moe.num_experts == 0) moe.num_experts.reset();
  if (moe.num_experts) {
    c.require(!c.a.experimental.spec, "model spec (--spec) is not supported with --num-experts");
    if (!moe.moe_ffn_hidden_size) moe.moe_ffn_hidden_size = c.a.network_size.ffn_hidden_size;
  }
  if (c.a.distributed.context_parallel_size > 1)
    c.require(!c.a.training.use_legacy_models, "context parallelism is not supported in legacy models");
  const std::int64_t ep = moe.expert_model_parallel_size;
  if (ep > 1) {
    if (c.require(moe.num_experts.has_value(), "--expert-model-parallel-size=" + show(ep) + " needs --num-experts"))
      c.require(*moe.num_experts % ep == 0, "--num-experts=" + show(*moe.num_experts) + " must be divisible by "
                                            "--expert-model-parallel-size=" + show(ep) + "; try " + divisors_text(*moe.num_experts));
    c.require(!c.a.mixed_precision.fp16, "expert parallelism is not supported with --fp16");
  }
  if (auto* list = std::get_if<std::vector<std::string>>(&moe.moe_router_load_balancing_type); list && list->size() == 1)
    moe.moe_router_load_balancing_type = std::string(list->front());
  if (auto* list = std::get_if<std::vector<double>>(&moe.moe_aux_loss_coeff); list && list->size() == 1)
    moe.moe_aux_loss_coeff = double(list->front());
}

void checkpoint_and_data(validation_context& c) {  // rules 67, 68, 72, 74, 76, 78
  auto& ck = c.a.checkpointing;
  const auto& d = c.a.distributed;
  if (c.a.derived.use_dist_ckpt && c.a.training.use_legacy_models)
    c.error("--use-dist-ckpt is not supported in legacy models; use --ckpt-format torch");
  if (ck.ckpt_format == "torch_dcp") {
    c.require(d.use_torch_fsdp2, "--ckpt-format torch_dcp is only tested with FSDP; add --use-torch-fsdp2");
    c.require(d.tensor_model_parallel_size <= 1 && d.pipeline_model_parallel_size <= 1,
              "--ckpt-format torch_dcp is not tested with megatron tp/pp");
  }
  if (ck.ckpt_format == "fsdp_dtensor") c.require(d.use_megatron_fsdp, "--ckpt-format fsdp_dtensor needs --use-megatron-fsdp");
  const auto& data = c.a.data;
  const int sources = int(data.mock_data) + int(data.data_path.has_value() && !data.data_path->empty()) +
                      int(data.train_data_path || data.valid_data_path || data.test_data_path);
  c.require(sources <= 1, "a single data source must be provided: give one of --mock-data, --data-path, or "
                          "--train-data-path/--valid-data-path/--test-data-path");
  if (!c.a.training.enable_gloo_process_groups && d.use_distributed_optimizer) {
    c.require(c.a.derived.use_dist_ckpt, "--disable-gloo-process-groups with the distributed optimizer needs a distributed "
                                         "checkpoint format (--ckpt-format torch_dist)");
  }
  if (ck.load_main_params_from_ckpt.value_or(false)) c.require(ck.no_load_optim.value_or(false), "--load-main-params-from-ckpt must be used with --no-load-optim");
  if (c.a.moe.moe_use_upcycling) {
    c.require(ck.save.has_value(), "--moe-use-upcycling needs --save");
    c.require(c.a.moe.num_experts.value_or(0) > 0, "--moe-use-upcycling turns a dense checkpoint into a MoE model: add --num-experts");
    c.require(ck.load.has_value(), "--moe-use-upcycling needs --load naming the dense model's checkpoint");
    c.require(!c.a.network_size.quick_geglu, "--moe-use-upcycling converts gelu, silu and squared_relu MLPs (Megatron's "
                                             "upcycling refuses others): drop --quick-geglu");
    ck.no_load_optim = ck.no_load_rng = true;
  }
  if (ck.non_persistent_ckpt_type == std::optional<std::string>("local"))
    c.require(ck.non_persistent_local_ckpt_dir.has_value(), "--non-persistent-ckpt-type local needs --non-persistent-local-ckpt-dir");
  auto& rep = c.a.distributed;
  if (rep.replication) {
    c.require(rep.replication_jump.has_value(), "--replication needs --replication-jump");
    c.require(ck.non_persistent_ckpt_type == std::optional<std::string>("local"), "--replication needs --non-persistent-ckpt-type local");
    // NVIDIA Resiliency Extension's parse_group_sequence asserts the same.
    const std::int64_t jump = rep.replication_jump.value_or(1), factor = rep.replication_factor;
    const std::int64_t world = c.placement.world_size;
    if (jump <= 0 || factor <= 0)
      c.error("--replication-jump and --replication-factor must be positive (got " + std::to_string(jump) + " and " +
              std::to_string(factor) + ")");
    else if (world % (jump * factor) != 0)
      c.error("--replication: the " + std::to_string(world) + " ranks cannot be split into replication groups of " +
              std::to_string(factor) + " ranks " + std::to_string(jump) + " apart (the world size must be divisible by "
              "--replication-jump times --replication-factor = " + std::to_string(jump * factor) + ")");
  } else {
    rep.replication_jump.reset();
  }
}

// Megatron appends the iterations its tracker file shows to be reproducibly wrong on one rank.
void skips_from_tracker(validation_context& c, const std::string& tracker) {
  const auto found = skipped_iterations_from_tracker(tracker);
  if (!found.error.empty()) c.warn("Could not parse iterations to skip in tracker file! (" + found.error + ")");
  c.warn("Will skip these iterations from tracker file: " + python_list_str(found.skip));
  if (!found.ignore.empty())
    c.warn("Will not skip these iterations due to multiple rank errors: " + python_list_str(found.ignore));
  auto& skip = c.a.training.iterations_to_skip;
  skip.insert(skip.end(), found.skip.begin(), found.skip.end());
}

void determinism_and_misc(validation_context& c) {  // rules 69, 70, 75, 77, 79-81
  const auto& t = c.a.training;
  if (t.deterministic_mode) {
    c.require(!t.use_flash_attn, "flash attention can not be used in deterministic mode; drop --use-flash-attn");
    c.require(!t.cross_entropy_loss_fusion, "cross entropy loss fusion can not be used in deterministic mode");
    const char* algo = std::getenv("NCCL_ALGO");
    const std::string a = algo ? algo : "";
    c.require(a == "Tree" || a == "Ring" || a == "CollnetDirect" || a == "CollnetChain" || a == "^NVLS",
              "NCCL_ALGO must be one of Tree, Ring, CollnetDirect, CollnetChain or ^NVLS in deterministic mode (got '" + a + "')");
  }
  if (c.a.mixed_precision.apply_query_key_layer_scaling) c.a.mixed_precision.attention_softmax_in_fp32 = true;
  if (const auto& tracker = t.result_rejected_tracker_filename) skips_from_tracker(c, *tracker);
  const auto& i = c.a.inference;
  if (i.inference_batch_times_seqlen_threshold > -1) {
    c.require(c.a.distributed.pipeline_model_parallel_size > 1,
              "--inference-batch-times-seqlen-threshold requires setting --pipeline-model-parallel-size > 1");
    c.require(i.cuda_graph_impl == "none", "--inference-batch-times-seqlen-threshold is incompatible with CUDA graphs");
  }
  if (i.inference_dynamic_batching)
    c.require(i.inference_dynamic_batching_block_size % 256 == 0,
              "--inference-dynamic-batching-block-size=" + show(i.inference_dynamic_batching_block_size) + " must be a multiple of 256");
  if (t.optimizer_cpu_offload) {
    c.require(c.a.experimental.use_precision_aware_optimizer, "--optimizer-cpu-offload requires --use-precision-aware-optimizer");
    c.require(!c.a.transformer_engine.fp8_param_gather || c.a.transformer_engine.fp8_recipe == "delayed",
              "When `--fp8-param-gather` is enabled, the optimizer cpu offload must be used in conjunction with "
              "`--fp8-recipe delayed`.");
  }
  if (c.a.moe.delay_wgrad_compute)
    c.require(c.a.transformer_engine.transformer_impl == "transformer_engine",
              "--delay-wgrad-compute is only supported with --transformer-impl transformer_engine");
  if (const auto& depths = c.a.network_size.mtp_num_layers; depths && *depths < 0)
    c.require(false, "--mtp-num-layers=" + show(*depths) + " must be a positive number of MTP layers (or 0 for none)");
  if (c.a.network_size.mtp_num_layers) {
    c.require(!t.use_legacy_models, "multi-token prediction is not supported with legacy models");
    const auto& p = c.a.network_size.position_embedding_type;
    c.require(p == "rope" || p == "none", "multi-token prediction needs --position-embedding-type rope or none");
  }
  if (i.cuda_graph_impl != "none")
    c.require(t.recompute_granularity != "full", "full recompute is not supported with CUDA graphs");
}

}  // namespace

void validate_training_args(validation_context& c) {
  precision(c);
  data_loader(c);
  training_length(c);
  model_shape(c);
  sequence_length(c);
  lr_and_save(c);
  mixed_precision_features(c);
  recompute_and_sequence_parallel(c);
  fusions_and_embeddings(c);
  experts(c);
  checkpoint_and_data(c);
  determinism_and_misc(c);
}

}  // namespace mactor::config::detail

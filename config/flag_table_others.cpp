// The flags accepted without effect, the refused ones with their reasons, and the implemented
// flags some of whose values are not built yet.
#include "config/flag_tables.hpp"

namespace mactor::config::detail {

namespace {

constexpr std::string_view performance_only = "performance-only; mactor's kernels give the same result without it";
constexpr std::string_view gpu_comm_only = "tunes NCCL/GPU communication; has no effect on mactor's transports";
constexpr std::string_view ignored_by_megatron = "ignored by Megatron-LM itself";

}  // namespace

const std::map<std::string_view, std::string_view>& accepted_flags() {
  static const std::map<std::string_view, std::string_view> table = {
      {"masked_softmax_fusion", performance_only},
      // NVIDIA Resiliency Extension's in-process Wrapper tunables: mactor's launcher restarts the
      // processes (tools/launcher/in_job_restart.hpp), whose own monitors these set.
      {"inprocess_monitor_thread_interval", "NVRx's monitor thread period; mactor's launcher watches the rank processes itself"},
      {"inprocess_monitor_process_interval", "NVRx's monitor process period; mactor's launcher watches the rank processes itself"},
      {"inprocess_progress_watchdog_interval", "NVRx's progress watchdog period; mactor's stages report every 0.5 s"},
      {"inprocess_heartbeat_interval", "NVRx's heartbeat period; mactor's stages report every 0.5 s"},
      {"inprocess_heartbeat_timeout", "NVRx's heartbeat timeout; under --inprocess-restart a rank is hung after "
                                      "--inprocess-soft-timeout without progress"},
      {"inprocess_barrier_timeout", "NVRx's restart barrier; mactor's restarted ranks meet in a fresh rendezvous "
                                    "(--inprocess-hard-timeout bounds it)"},
      {"inprocess_completion_timeout", "NVRx's completion barrier; mactor's launcher sees every rank's exit"},
      {"inprocess_last_call_wait", "NVRx's wait for other ranks' faults; mactor's launcher restarts at the first"},
      {"inprocess_termination_grace_time", "NVRx's SIGTERM grace; mactor's launcher has --kill-grace"},
      {"inprocess_granularity", "node restarts a node's ranks together on GPUs; mactor replaces the failed rank alone"},
      {"inprocess_empty_cuda_cache", "no CUDA caching allocator on the CPU backend"},
      {"one_logger_project", "read only by NVIDIA's internal one_logger package (not on PyPI), which mactor has not: "
                             "Megatron without it ignores this flag too (see --no-one-logger)"},
      {"one_logger_run_name", "read only by NVIDIA's one_logger package (see --one-logger-project)"},
      {"one_logger_async", "read only by NVIDIA's one_logger package (see --one-logger-project)"},
      {"app_tag_run_name", "read only by NVIDIA's one_logger package (see --one-logger-project)"},
      {"app_tag_run_version", "read only by NVIDIA's one_logger package (see --one-logger-project)"},
      {"suggested_communication_unit_size", "Megatron FSDP's elements per gather (and its prefetch size); mactor's "
                                            "FSDP gathers one unit (the embedding, a layer, the rest) at a time, the same values"},
      {"vocab_extra_ids", "Megatron adds the <extra_id_N> tokens only in its legacy BertWordPiece* and "
                          "SentencePieceTokenizer (T5/BERT tokenizers, which mactor refuses); its GPT tokenizers and the "
                          "megatron.core.tokenizers path ignore the flag, as mactor's do"},
      {"bias_swiglu_fusion", performance_only},
      {"bias_dropout_fusion", performance_only},
      {"apply_rope_fusion", performance_only},
      {"cross_entropy_loss_fusion", performance_only},
      {"cross_entropy_fusion_impl", performance_only},
      {"use_flash_attn", performance_only},
      {"gradient_accumulation_fusion", performance_only},
      {"no_persist_layer_norm", performance_only},
      {"moe_permute_fusion", performance_only},
      {"moe_shared_expert_overlap", "performance-only: Megatron runs the shared expert's GEMMs on a side CUDA stream "
                                    "during the alltoall token exchange and adds the same output; only the order in "
                                    "which the input gradient's terms are summed differs (rounding level, as Megatron's "
                                    "own docs say); mactor computes the shared expert in line"},
      {"moe_router_fusion", performance_only},
      {"moe_extended_tp", "deprecated in Megatron-LM (use --expert-tensor-parallel-size): Megatron-Core stores it in "
                          "ModelParallelConfig and never reads it"},
      {"moe_pad_experts_for_cuda_graph_inference", "read only by Megatron-Core's inference text-generation "
                                                   "controller and dynamic engine (CUDA-graph decoding); "
                                                   "pretrain_gpt never reads it"},
      {"overlap_moe_expert_parallel_comm", "performance-only: Megatron's combined 1F1B schedule runs one micro-batch's "
                                           "forward beside another's backward so that each one's expert all-to-all hides "
                                           "behind the other's compute; the results are the same. mactor runs that "
                                           "schedule's order (one more warmup forward when interleaved, F0 then each "
                                           "forward paired with the previous backward without pipelining, mactor "
                                           "schedule prints it) but each pair's forward before its backward, the "
                                           "all-to-alls in line (Megatron's rules for the flag are checked)"},
      {"moe_pad_expert_input_to_capacity", "performance-only: Megatron fills each expert to capacity with "
                                           "probability-0 tokens, whose output and gradients are zero; mactor does not "
                                           "pad, with the same numbers (with fp8, where the padding would enter the "
                                           "experts' scales, refused)"},
      {"gradient_reduce_div_fusion", performance_only},
      {"defer_embedding_wgrad_compute", "performance-only: Megatron defers the last stage's output-layer weight-gradient "
                                        "GEMMs to overlap them with pipeline communication; mactor computes them at once"},
      {"wgrad_deferral_limit", "performance-only: bounds --defer-embedding-wgrad-compute's deferral"},
      {"tp_comm_overlap", "performance-only: Transformer Engine's userbuffers overlap of tensor-parallel communication "
                          "with GEMMs; mactor's tensor-parallel collectives give the same values"},
      {"tp_comm_overlap_cfg", "configures Transformer Engine's userbuffers for --tp-comm-overlap"},
      {"use_persistent_ckpt_worker", "mactor's asynchronous saves already run in the checkpointer actor, which lives "
                                     "for the whole job: the persistent worker this asks for"},
      {"overlap_param_gather_with_optimizer_step", "performance-only: overlaps the distributed optimizer's parameter "
                                                   "all-gather with the optimizer step; the parameters are the same"},
      {"attention_backend", "mactor has one attention implementation (the local spec's, exact softmax in fp32)"},
      {"transformer_impl", "mactor has one transformer implementation, numerically Megatron's local spec; local "
                           "without --num-experts only drops --qk-l2-norm, as Megatron's local layer spec is built without it"},
      {"use_cpu_initialization", "mactor always initializes parameters on the CPU, as this flag asks"},
      {"fp16_lm_cross_entropy", "ignored by Megatron-Core's GPTModel (core_v0.15 stores it and never reads it): the "
                                "loss comes from fp32 logits either way, as here; it still needs --fp16"},
      {"dist_ckpt_optim_fully_reshardable", "mactor's distributed-optimizer checkpoints are always fully reshardable: "
                                            "any tensor-, pipeline- or data-parallel layout loads them"},
      {"distrib_optim_fully_reshardable_mem_efficient", "mactor reshards optimizer state piece by piece already"},
      {"dist_ckpt_save_pre_mcore_014", "mactor writes one checkpoint format, which every layout and version of mactor "
                                       "reads; Megatron's loaders do not read it either way"},
      {"ckpt_fully_parallel_save", "every rank writes only its own shards: saves are always fully parallel"},
      {"ckpt_fully_parallel_save_deprecated", "deprecated in Megatron, which only prints a notice: saves are fully "
                                              "parallel by default there and always here"},
      {"ckpt_fully_parallel_load", "every rank reads only the pieces of its own shards: loads are always fully parallel"},
      {"ckpt_assume_constant_structure", "performance-only: Megatron caches the save plan; mactor's plan is cheap "
                                         "and the files are the same"},
      {"disable_bf16_reduced_precision_matmul", "mactor's CPU GEMMs accumulate bf16 products in fp32 and round the "
                                                "result once: the full-precision reduction this flag asks of cuBLAS"},
      {"apply_query_key_layer_scaling", "mactor's attention keeps Q K^T in fp32 (as Transformer Engine's fused "
                                        "attention does), where dividing the scores by the layer number and "
                                        "multiplying them back in the fp32 softmax changes nothing; the "
                                        "--attention-softmax-in-fp32 it implies is always on here"},
      {"num_workers", "data loading runs in the training process; results are the same"},
      {"num_dataset_builder_threads", "index building is single-threaded here; results are the same"},
      {"mmap_bin_files", "mactor always memory-maps .bin files; results are the same"},
      {"async_tensor_model_parallel_allreduce", ignored_by_megatron},
      {"deprecated_use_mcore_models", ignored_by_megatron},
      {"fp8_interval", ignored_by_megatron},
      {"pin_cpu_grads", gpu_comm_only},
      {"pin_cpu_params", gpu_comm_only},
      {"optimizer_offload_fraction", "the share of the parameters --optimizer-cpu-offload updates on the host rather "
                                     "than the device; both parts keep fp32 state, so the values are the same"},
      {"use_torch_optimizer_for_cpu_offload", "picks torch's Adam for the device part of --optimizer-cpu-offload; the "
                                              "update is the same Adam"},
      {"overlap_cpu_optimizer_d2h_h2d", "performance-only: overlaps --optimizer-cpu-offload's host-device copies"},
      {"tp_comm_overlap_ag", "configures --tp-comm-overlap's userbuffers (all-gather overlap)"},
      {"tp_comm_overlap_rs", "configures --tp-comm-overlap's userbuffers (reduce-scatter overlap)"},
      {"tp_comm_overlap_rs_dgrad", "configures --tp-comm-overlap's userbuffers (reduce-scatter with dgrad)"},
      {"tp_comm_bulk_dgrad", "configures --tp-comm-overlap's userbuffers (bulk overlap with dgrad)"},
      {"tp_comm_bulk_wgrad", "configures --tp-comm-overlap's userbuffers (bulk overlap with wgrad)"},
      {"tp_comm_split_ag", "configures --tp-comm-overlap's userbuffers (split all-gather)"},
      {"tp_comm_split_rs", "configures --tp-comm-overlap's userbuffers (split reduce-scatter)"},
      {"train_sync_interval", "performance-only: how often Megatron synchronizes the host with the device"},
      {"scatter_gather_tensors_in_pipeline", ignored_by_megatron},
      {"use_ring_exchange_p2p", "picks torch's ring-exchange kernel for Megatron's pipeline transfers; mactor's "
                                "transfers move the same tensors"},
      {"pipeline_model_parallel_comm_backend", "picks NCCL or UCC for Megatron's pipeline transfers; mactor's run on its "
                                               "own transports (UCX between processes, NCCL between GPUs)"},
      {"keep_fp8_transpose_cache", "memory-for-speed only: Megatron FSDP keeps fp8 weights' transposes between "
                                   "forward and backward; the values are the same"},
      {"trust_remote_code", "lets transformers run a tokenizer repository's Python code; mactor's HuggingFaceTokenizer "
                            "reads tokenizer.json itself and runs none"},
      {"align_grad_reduce", "performance-only: whether the virtual stages' overlapped gradient reductions launch "
                            "together; the reduced gradients are the same"},
      {"align_param_gather", "performance-only: whether the virtual stages' overlapped parameter all-gathers launch "
                             "together; the parameters are the same"},
      {"distributed_backend", "mactor's own transports (UCX, NCCL, in-process) replace torch.distributed backends"},
      {"nccl_communicator_config_path", gpu_comm_only},
      {"nccl_ub", gpu_comm_only},
      {"disable_symmetric_registration", gpu_comm_only},
      {"use_sharp", gpu_comm_only},
      {"sharp_enabled_group", gpu_comm_only},
      {"high_priority_stream_groups", gpu_comm_only},
      {"ddp_pad_buckets_for_high_nccl_busbw", gpu_comm_only},
      {"tp_comm_bootstrap_backend", gpu_comm_only},
      {"enable_gloo_process_groups", "mactor has no Gloo process groups"},
      {"empty_unused_memory_level", "PyTorch caching-allocator control; mactor frees buffers itself"},
      {"manual_gc", "Python garbage-collector control; there is no Python runtime in mactor"},
      {"manual_gc_interval", "Python garbage-collector control; there is no Python runtime in mactor"},
      {"manual_gc_eval", "Python garbage-collector control; there is no Python runtime in mactor"},
      {"local_rank", "torch.distributed.launch passes it; mactor reads the rank from the launcher's environment"},
      {"barrier_with_L1_time", "timer barrier placement; does not change results"},
      {"tensorboard_queue_size", "the writer flushes at every log line instead of queueing"},
      {"logging_level", "Python logging level; mactor's log lines do not depend on it"},
      {"enable_full_sharding_in_hsdp", "Megatron-LM core_v0.15.0 reads it nowhere: its DDP config's "
                                       "outer_dp_sharding_strategy stays no_shard, so hybrid FSDP replicates over the "
                                       "optimizer instances with or without it, as mactor does"},
      {"te_rng_tracker", "Transformer Engine RNG tracker; mactor has no Transformer Engine"},
      // Training CUDA graphs: Megatron captures the layers' (or the attention's) kernel launches once
      // and replays them, the same arithmetic; mactor's training runs on CPUs, with no launches to capture.
      {"cuda_graph_impl", "CUDA-graph capture of the GPU kernels (local or transformer_engine), validated as Megatron "
                          "does; mactor trains on CPUs, where a captured graph would replay the same arithmetic"},
      {"cuda_graph_scope", "which kernels a CUDA graph captures (full, attn, full_iteration), validated as Megatron does"},
      {"cuda_graph_warmup_steps", "eager iterations before a local CUDA graph is captured; nothing to capture on CPUs"},
      {"enable_cuda_graph", "deprecated spelling of --cuda-graph-impl local (validated as Megatron does)"},
      {"moe_deepep_num_sms", "the GPU multiprocessors DeepEP's kernels use; mactor's exchange runs on CPU threads"},
      {"enable_experimental", "turns on Megatron-Core's experimental_fn kernels (the fused index converter, the fused "
                              "MLA YaRN RoPE and the fused routing-map padding, the last two with --moe-permute-fusion), "
                              "which compute what the unfused paths compute; mactor has one path for each"},
      {"external_cuda_graph", "deprecated spelling of --cuda-graph-impl transformer_engine (validated as Megatron does)"},
      {"apply_residual_connection_post_layernorm",
       "Megatron-Core's TransformerLayer never reads it (core_v0.15 keeps it in TransformerConfig; only the legacy "
       "model, which --use-legacy-models selects and mactor does not offer, moves the residual after the norm): "
       "GPT residuals stay pre-norm, as in Megatron"},
      {"data_parallel_random_init",
       "Megatron seeds each data-parallel replica's initialization with seed + 10 * dp_rank, then broadcasts replica "
       "0's parameters (get_model), so every replica starts from the weights it has without the flag; what remains, a "
       "different dropout stream per replica, mactor always has (masks follow each micro-batch's global sample index)"},
      {"clone_scatter_output_in_embedding",
       "memory only: Megatron clones the sequence-parallel scatter's output so the full embedding output can be freed; "
       "mactor's embedding writes its shard into its own buffer already, and no value changes"},
  };
  return table;
}

// Not-implemented flags whose error says more than "not built yet".
const std::map<std::string_view, std::string_view>& refused_flags() {
  static const std::map<std::string_view, std::string_view> table = {
      {"cache_mla_latents", "caches MLA latents for Megatron's dynamic inference engine, which mactor does not have "
                            "(Megatron's training forward asserts an inference context with it)"},
  };
  return table;
}


const std::vector<value_limit>& value_limits() {
  static const std::vector<value_limit> limits = {
      {"position_embedding_type", "--position-embedding-type", {"learned_absolute", "rope", "none"}},
      {"tokenizer_type", "--tokenizer-type",
       {"GPT2BPETokenizer", "HuggingFaceTokenizer", "GPTSentencePieceTokenizer", "Llama2Tokenizer", "TikTokenizer",
        "NullTokenizer"}},
      {"dataloader_type", "--dataloader-type", {"single"}},
      {"ckpt_format", "--ckpt-format", {"torch_dist", "torch", "fsdp_dtensor"}},
            {"ckpt_convert_format", "--ckpt-convert-format", {"torch_dist", "torch"}},
      {"non_persistent_ckpt_type", "--non-persistent-ckpt-type", {"global", "local"}},
      {"main_params_dtype", "--main-params-dtype", {"fp32", "fp16"}},
      {"rerun_mode", "--rerun-mode", {"disabled", "validate_results"}},
      {"moe_router_load_balancing_type", "--moe-router-load-balancing-type", {"aux_loss", "seq_aux_loss", "global_aux_loss", "sinkhorn", "none"}},
      {"moe_token_dispatcher_type", "--moe-token-dispatcher-type", {"allgather", "alltoall", "flex"}},
  };
  return limits;
}

}  // namespace mactor::config::detail

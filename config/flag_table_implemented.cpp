// The implemented flags: each with what mactor does where it differs from "as in Megatron-LM".
#include "config/flag_tables.hpp"

namespace mactor::config::detail {

// Flags whose Megatron meaning mactor has (kept sorted by group for review).
const std::map<std::string_view, std::string_view>& implemented_flags() {
  static const std::map<std::string_view, std::string_view> table = {
      {"num_layers", ""},
      {"encoder_num_layers", ""},
      {"hidden_size", ""},
      {"ffn_hidden_size", ""},
      {"num_attention_heads", ""},
      {"kv_channels", ""},
      {"group_query_attention", ""},
      {"num_query_groups", ""},
      {"max_position_embeddings", ""},
      {"position_embedding_type", "learned_absolute, rope and none (mrope and relative are refused)"},
      {"use_rotary_position_embeddings", ""},
      {"rotary_base", ""},
      {"rotary_percent", ""},
      {"rotary_interleaved", "rotates channel pairs (x0, x1), (x2, x3), ... (checked against PyTorch)"},
      {"rotary_seq_len_interpolation_factor", "RoPE positions divided by the factor (checked against PyTorch)"},
      {"use_rope_scaling", "Llama 3.1 frequency scaling, Megatron's constants (checked against PyTorch)"},
      {"rope_scaling_factor", "with --use-rope-scaling"},
      {"no_rope_freq", "int N or a list: the layers that skip RoPE (checked against PyTorch)"},
      {"multi_latent_attention", "Megatron-Core's MLASelfAttention with tp, sp, cp, pp and the distributed optimizer "
                                 "(checked against an independent PyTorch MLA); under fp8 the down projections are fp8 GEMMs too (kv_down one GEMM over [latent; k_pe]); not with --softmax-type"},
      {"q_lora_rank", "unset: linear_q_proj; set: linear_q_down_proj, linear_q_up_proj"},
      {"kv_lora_rank", ""},
      {"qk_head_dim", ""},
      {"qk_pos_emb_head_dim", ""},
      {"v_head_dim", ""},
      {"rope_type", "rope or yarn (MLA's default) in multi-latent attention"},
      {"rotary_scaling_factor", "YaRN's scaling factor (and the softmax scale's mscale) in multi-latent attention"},
      {"mscale", "YaRN's concentration factor in multi-latent attention"},
      {"mscale_all_dim", "YaRN's concentration factor and softmax scale in multi-latent attention"},
      {"window_size", "(left, 0): causal sliding-window attention (checked against PyTorch)"},
      {"window_attn_skip_freq", "int N or a list: which layers keep full attention (checked against PyTorch)"},
      {"qk_layernorm", "a norm of the model's --normalization over kv_channels on each query and key head after the "
                       "qkv projection, before RoPE; its gradients summed over tensor parallelism (checked against PyTorch)"},
      {"qk_l2_norm", "Llama 4's parameter-free L2Norm, x * rsqrt(mean(x^2) + --norm-epsilon) in fp32, on each query and "
                     "key head after the qkv projection and before RoPE, in place of --qk-layernorm's norms, where "
                     "Megatron's gpt_builders passes it (the Transformer Engine layer spec, default, and the MoE block "
                     "spec; with --transformer-impl local and no experts, or an imported --spec, it has no effect and "
                     "mactor warns); refused with --multi-latent-attention as the specs assert (checked against "
                     "PyTorch forward and backward; TP, PP, CP x TP with SP log the one-process losses)"},
      {"test_mode", "with --qk-layernorm, the query/key norm weights are compared by hash across the tensor- and "
                    "data-parallel ranks before every step's forward passes (Megatron's run_realtime_tests checks in "
                    "each attention forward; the weights only change at the step); a mismatch stops the job naming them"},
      {"softmax_type", "vanilla, off-by-one and learnable (a softmax_offset sink logit per head; checked against PyTorch)"},
      {"add_position_embedding", "with rope, as Megatron accepts it"},
      {"make_vocab_size_divisible_by", ""},
      {"normalization", ""},
      {"norm_epsilon", ""},
      {"apply_layernorm_1p", ""},
      {"openai_gelu", ""},
      {"swiglu", ""},
      {"untie_embeddings_and_output_weights", ""},
      {"attention_dropout", ""},
      {"hidden_dropout", ""},
      {"weight_decay", ""},
      {"start_weight_decay", ""},
      {"end_weight_decay", ""},
      {"weight_decay_incr_style", ""},
      {"clip_grad", ""},
      {"adam_beta1", ""},
      {"adam_beta2", ""},
      {"adam_eps", ""},
      {"sgd_momentum", ""},
      {"micro_batch_size", ""},
      {"global_batch_size", ""},
      {"rampup_batch_size", "each iteration's batch from Megatron's ramp-up calculator; consumed samples, LR steps and the logged global batch size follow it"},
      {"decrease_batch_size_if_needed", "the running batch rounded down to a multiple of micro batch x data-parallel size"},
      {"train_iters", ""},
      {"train_samples", ""},
      {"log_interval", ""},
      {"exit_interval", ""},
      {"exit_duration_in_mins", "the coordinator stops every rank at the same iteration once training has run past the limit, saving first with --save"},
      {"skip_train", "evaluates the validation and test sets at iteration 0"},
      {"add_bias_linear", ""},
      {"add_qkv_bias", ""},
      {"optimizer", ""},
      {"dataloader_type", "single only"},
      {"bias_gelu_fusion", "selects Megatron's tanh GeLU, as the fused kernel computes it"},
      {"seed", "seeds initialization, dropout and data shuffling"},
      {"init_method_std", ""},
      {"lr", ""},
      {"lr_decay_style", ""},
      {"lr_wsd_decay_style", ""},
      {"lr_decay_iters", ""},
      {"lr_decay_samples", ""},
      {"lr_wsd_decay_samples", ""},
      {"lr_wsd_decay_iters", ""},
      {"lr_warmup_fraction", ""},
      {"lr_warmup_iters", ""},
      {"lr_warmup_samples", ""},
      {"lr_warmup_init", ""},
      {"min_lr", ""},
      {"decoupled_lr", ""},
      {"decoupled_min_lr", ""},
      {"eval_iters", ""},
      {"eval_interval", ""},
      {"full_validation", "each evaluation reads the whole validation set (each set, with several) from its start, one "
                          "epoch built without a sample count, every whole global batch once (Megatron takes the "
                          "set's length in samples for its step count); the test split keeps --eval-iters"},
      {"multiple_validation_sets", "each prefix of --valid-data-path (or the validation blend of "
                                   "--per-split-data-args-path) is its own set, evaluated and logged as "
                                   "'validation-<i> loss at ...' with 'lm loss validation-<i>' TensorBoard and W&B tags; "
                                   "needs --full-validation unless --skip-train, as in Megatron"},
      {"data_path", ""},
      {"split", ""},
      {"train_data_path", ""},
      {"valid_data_path", ""},
      {"test_data_path", ""},
      {"iterations_to_skip", "the listed iterations (counted as Megatron's loop counts them: iterations done so far) consume their batch without training, logging, evaluating or saving; 'skipped samples:' in the log, skipped-train-samples in TensorBoard and the checkpoint's args"},
      {"wandb_project", "Megatron's wandb.init and wandb.log calls, made by the wandb Python package ($MACTOR_PYTHON, else python3) "
                        "in a bridge process on rank 0: the same keys and steps (with --tensorboard-dir, as Megatron nests them)"},
      {"wandb_exp_name", "the W&B run's name (required with --wandb-project, as Megatron)"},
      {"wandb_entity", "the W&B entity passed to wandb.init"},
      {"wandb_save_dir", "wandb.init's dir (default <save>/wandb, as Megatron)"},
      {"ckpt_convert_format", "the loaded checkpoint saved again in this format (torch or torch_dist) under "
                              "<--ckpt-convert-save>/<format>, then the job exits before training, as Megatron's setup_model_and_optimizer"},
      {"ckpt_convert_save", "where --ckpt-convert-format's checkpoint goes"},
      {"data_args_path", "the --data-path words read from a file (whitespace-separated), as Megatron's get_blend_and_blend_per_split"},
      {"per_split_data_args_path", "a JSON file with train, valid and test (a string of words, a list, or null) in place of --train/valid/test-data-path"},
      {"batch_size", "refused at start as Megatron-LM refuses it: no longer valid, use --micro-batch-size (exit 2)"},
      {"warmup", "refused at start as Megatron-LM refuses it: no longer valid, use --lr-warmup-fraction (exit 2)"},
      {"model_parallel_size", "refused at start as Megatron-LM refuses it: no longer valid, use --tensor-model-parallel-size (exit 2)"},
      {"checkpoint_activations", "stops at start as Megatron-LM does: no longer valid, use --recompute-activations or --recompute-granularity/--recompute-method (exit 2)"},
      {"use_dist_ckpt_deprecated", "deprecated as in Megatron-LM: prints that it has no effect; --ckpt-format selects the format"},
      {"dist_ckpt_format_deprecated", "deprecated as in Megatron-LM: prints that it has no effect; --ckpt-format selects the format"},
      {"data_cache_path", ""},
      {"mock_data", ""},
      {"seq_length", ""},
      {"encoder_seq_length", ""},
      {"reset_position_ids", ""},
      {"eod_mask_loss", ""},
      {"reset_attention_mask", "the dataset's document mask reaches every attention (a query sees only the keys of its "
                               "own document, Megatron's unfused masked softmax; checked against Megatron's mask), "
                               "with tp, sp, pp and cp (a2a and allgather; p2p layers all-gather instead of ring attention); a layer with "
                               "--window-size keeps its window alone and "
                               "--no-create-attention-mask-in-dataloader drops the mask, as in Megatron"},
      {"create_attention_mask_in_dataloader", "without it the dataset builds no attention mask, so --reset-attention-mask "
                                              "does not reach the attention (Megatron's causal fallback); the causal mask "
                                              "is applied inside attention either way"},
      {"mid_level_dataset_surplus", ""},
      {"vocab_size", ""},
      {"vocab_file", ""},
      {"merge_file", ""},
      {"tokenizer_model", ""},
      {"tokenizer_type", "GPT2BPETokenizer, HuggingFaceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer, TikTokenizer, NullTokenizer"},
      {"tiktoken_pattern", "v1 and v2, split by hand as tiktoken's regex does (checked against tiktoken and Megatron)"},
      {"tiktoken_num_special_tokens", ""},
      {"tiktoken_special_tokens",
       "must hold <unk> <s> </s> <mask> <pad> <cls> <sep> (Megatron's default path), or <unk> <s> </s> with --legacy-tokenizer"},
      {"legacy_tokenizer",
       "TikTokenizer: CustomTikTokenizer's behaviour (special-token text encoded as ordinary text, no pad id, its "
       "unique_identifiers) instead of TikTokenTokenizer's; Llama2Tokenizer: a BOS before each text (preprocess_data), "
       "which the sentencepiece library of the default path does not add. "
       "The dataset takes eod, pad and the index cache's tokenizer identifiers from the legacy tokenizer with it, "
       "from megatron.core.tokenizers' without it (data/dataset_tokenizer)"},
      {"enable_one_logger",
       "without it the last rank prints Megatron's warning that the one_logger package (NVIDIA's internal E2E "
       "metrics tracker, not on PyPI) is required, and trains on, as Megatron does where the package is missing; "
       "--no-one-logger silences it"},
      {"tokenizer_metadata",
       "the dataset's tokenizer (Megatron's default path, not with --legacy-tokenizer or NullTokenizer): the file's library "
       "and model_type decide its eod and pad (loss-masked labels) and the class in the index cache's hash; a library "
       "that cannot load the type's tokenizer is refused where Megatron's build_tokenizer fails too (byte-level loads for "
       "the SentencePiece types: eod 0, pad 1); preprocess_data takes it too and tokenizes with that library; a missing file, unknown library or model_type, or a custom tokenizer_class exit 2"},
      {"log_params_norm", ""},
      {"tensorboard_dir", "the args text and the scalars Megatron's training_log and evaluate write (no GPU memory stats)"},
      {"tensorboard_log_interval", ""},
      {"log_timers_to_tensorboard", "iteration-time, throughput and, with --timing-log-level 1 or 2, the max over ranks of each timer as '<name>-time'"},
      {"timing_log_level", "0: 'evaluate' before each validation block; 1 adds, after each training line, forward-backward, embedding-grads-all-reduce, all-grads-sync, params-all-gather (distributed optimizer), optimizer-copy-to-main-grad, optimizer-unscale-and-check-inf (with a loss scaler), optimizer-clip-main-grad, optimizer-count-zeros, optimizer-inner-step, optimizer-copy-main-to-model-params (16-bit models and the distributed optimizer) and optimizer; 2 adds forward-compute, backward-compute, forward-recv and backward-recv (the time spent waiting for the input: transfers are asynchronous). Megatron's timers of blocking send/recv calls are not printed (mactor's transfers are asynchronous), nor the setup timers yet"},
      {"timing_log_option", ""},
      {"log_loss_scale_to_tensorboard", ""},
      {"log_validation_ppl_to_tensorboard", ""},
      {"log_world_size_to_tensorboard", ""},
      {"log_throughput", "Megatron's model-FLOPs formula for dense GPTs, per rank (CPU cores stand in for GPUs)"},
      {"log_num_zeros_in_grad", ""},
      {"tensor_model_parallel_size", "tensor-parallel linears, vocab-parallel embedding and loss over the data plane"},
      {"sequence_parallel", "norms, dropouts and residuals on [seq / tp] shards; all-gather / reduce-scatter around the "
                            "tensor-parallel linears; pipeline messages are the shards"},
      {"context_parallel_size", "each rank holds sequence chunks r and 2cp-1-r (Megatron's load-balanced split) of tokens, "
                                "labels, loss mask and positions; attention reaches the other ranks' keys and values as "
                                "--cp-comm-type says; gradients, losses and the distributed optimizer reduce over data x "
                                "context parallel"},
      {"cp_comm_type", "one entry or one per layer. p2p: ring attention (key/value blocks passed around the context-parallel "
                       "ring while the current block computes, online-softmax merge, key/value gradients sent back around "
                       "the ring; a 16-bit model's blocks travel in 16 bits, computed and accumulated in fp32); a2a: "
                       "Ulysses all-to-all to head sharding and back (query groups per tp rank divisible by cp); "
                       "allgather: all-gather keys and values, reduce-scatter their gradients; a2a+p2p: a2a inside "
                       "--hierarchical-context-parallel-sizes' first-level groups (consecutive context-parallel ranks), "
                       "ring attention between them on the second level, as Transformer Engine does; multi-latent "
                       "attention always all-gathers"},
      {"hierarchical_context_parallel_sizes", "Megatron's hierarchical context-parallel groups (level 0: consecutive "
                                              "context-parallel ranks); a2a+p2p attention runs on the two levels. Like "
                                              "Megatron, other --cp-comm-types leave them unused"},
      {"pipeline_model_parallel_size", "1F1B (interleaved with a virtual pipeline); out-of-order backwards recompute the chunk's forward"},
      {"num_layers_per_virtual_pipeline_stage", ""},
      {"num_virtual_stages_per_pipeline_rank", ""},
      {"microbatch_group_size_per_vp_stage", ""},
      {"overlap_p2p_comm_warmup_flush", "the interleaved schedule posts the next warmup/flush receive before each compute, in Megatron's order"},
      {"decoder_first_pipeline_num_layers", "uneven first stage; with a virtual pipeline split over its chunks"},
      {"decoder_last_pipeline_num_layers", "uneven last stage; with a virtual pipeline split over its chunks"},
      {"account_for_embedding_in_pipeline_split", "the embedding counts as a layer of the first stage"},
      {"account_for_loss_in_pipeline_split", "the loss counts as a layer of the last stage"},
      {"pipeline_model_parallel_layout", "Megatron's layout language (E, t, L; '|' between stages; repeats); empty stages pass activations through; MTP 'm' after the decoder in the last stage with 'L' (Megatron's rule)"},
      {"overlap_p2p_comm", "transfers are always posted asynchronously; the flag picks Megatron's op order"},
      {"use_distributed_optimizer", "optimizer state sharded over data-parallel ranks: reduce-scatter grads, all-gather params"},
      {"use_megatron_fsdp", "Megatron FSDP's sharding over the data-parallel ranks, by --data-parallel-sharding-strategy "
                            "(config/data_parallel_sharding.hpp); checkpoints in --ckpt-format fsdp_dtensor"},
      {"data_parallel_sharding_strategy", "with --use-megatron-fsdp: no_shard is plain DDP (all-reduced gradients); "
                                          "optim the distributed optimizer's sharding (ZeRO-1); optim_grads also "
                                          "reduce-scatters each backward's gradients into the shard and frees the whole "
                                          "buffer (ZeRO-2); optim_grads_params also keeps only the shard of each model "
                                          "chunk's parameters, all-gathered into a buffer before each forward and "
                                          "backward of the chunk and freed after (ZeRO-3); MoE experts on groups of "
                                          "their own (--expert-model-parallel-size > 1, or an "
                                          "--expert-tensor-parallel-size other than tp) shard over the "
                                          "expert-data-parallel group"},
      {"use_torch_fsdp2", "fully sharded parameters, gradients and optimizer state: Megatron FSDP's optim_grads_params "
                          "machinery (training/fsdp_residency.hpp)"},
      {"torch_fsdp2_reshard_after_forward", "with --use-torch-fsdp2 the gathered parameters stay from a forward to its "
                                            "backward (FSDP2's reshard_after_forward=False)"},
      {"init_model_with_meta_device",
       "with --use-megatron-fsdp and sharded parameters (optim_grads_params) each chunk is laid out without memory and "
       "holds only its shard from the start: each parameter the shard touches is drawn whole, one at a time, and only "
       "the shard kept, so the initial memory is the shard plus the largest parameter, and the values equal those of a "
       "whole initialization; with whole parameters (no_shard, optim, optim_grads) the same whole model is drawn. "
       "Without Megatron FSDP Megatron leaves the parameters uninitialized for --load to fill: mactor requires --load "
       "there"},
      {"fsdp_double_buffer", "two freed parameter gather buffers are kept and reused instead of one allocated per gather"},
      {"overlap_grad_reduce", "gradient buckets are reduced on a background collective thread as the last micro-batch's backward completes them (with the distributed optimizer, one bucket per model chunk; with sequence parallelism too, at finalize); under FSDP's "
                              "sharded gradients each backward's reduce-scatter runs in line, the same numbers"},
      {"overlap_param_gather", "the distributed optimizer's parameter all-gather runs in the background until the next forward needs the parameters"},
      {"ddp_bucket_size", "elements per gradient bucket with --overlap-grad-reduce (default Megatron's max(40M, 1M x dp))"},
      {"ddp_num_buckets", "the bucket size becomes this rank's parameter count / N (Megatron's bucket_size = num_parameters // N); not with --ddp-bucket-size"},
      {"save", "torch_dist semantics: every rank writes its shards with global-shape metadata and CRC-32s; the tracker moves only after every shard is durable"},
      {"save_interval", ""},
      {"no_save_optim", ""},
      {"no_save_rng", "dropout masks and data order derive from --seed and the sample index, so there is no RNG state to leave out"},
      {"perform_initialization",
       "--no-initialization: the weights' init_method draws (linear, embedding, router and expert weights) are "
       "skipped, as Megatron's perform_initialization=False skips them, and the weights stay zero for the checkpoint "
       "to fill (norms' ones, biases' zeros and the Mamba mixer's own values are still set); needs --load or "
       "--pretrained-checkpoint, and a checkpoint there (exit 2 otherwise: Megatron would train from torch.empty's "
       "memory)"},
      {"load", "reshards on load: any tensor-, pipeline- or data-parallel layout (with or without the distributed optimizer) reads any other's checkpoint"},
      {"no_load_optim", "the model alone: optimizer and LR scheduler start anew, iteration and consumed samples are kept"},
      {"no_load_rng", "dropout masks and data order derive from --seed and the sample index, so there is no RNG state to skip"},
      {"finetune", "the model alone, from iteration 0"},
      {"ckpt_step", ""},
      {"exit_on_missing_checkpoint", "a missing checkpoint is an error (exit status 2) rather than Megatron's silent exit"},
      {"async_save", "the stage hands a snapshot to its rank's checkpointer actor and trains on; the next save waits for the previous one"},
      {"ckpt_format", "torch_dist (mactor's own shard files with Megatron's directory layout) and torch (Megatron's "
                      "per-rank iter_N/mp_rank_TT[_PPP]/model_optim_rng.pt torch.save files, read and written by "
                      "mactor's zip and pickle code; with --use-distributed-optimizer also Megatron's distrib_optim.pt "
                      "(Adam's state gathered in Megatron's buffer layout); not with expert parallelism); "
                      "see checkpoint/README.md; fsdp_dtensor (with --use-megatron-fsdp) writes and reads the "
                      "torch_dist files, so it loads into any layout, sharded or not"},
      {"strict_fsdp_dtensor_load", "--ckpt-format fsdp_dtensor loads strictly (a tensor the model needs must be in the "
                                   "checkpoint) unless this is given: then absent tensors are listed and keep their "
                                   "initial values (Megatron's allow_partial_load)"},
      {"auto_detect_ckpt_format", "on load, Megatron's rule: metadata.json means torch_dist, mp_rank_0* means torch, "
                                  "and either loads (as --ckpt-format torch_dist also does)"},
      {"override_opt_param_scheduler", ""},
      {"use_checkpoint_opt_param_scheduler", ""},
      {"bf16", "bf16 weights, activations and pipeline transfers; fp32 main parameters, main gradients and optimizer "
               "state (Megatron's Float16Module with its mixed-precision optimizer); CPU kernels compute in fp32 and "
               "round each output to bf16 once; checkpoints hold the fp32 main parameters"},
      {"accumulate_allreduce_grads_in_fp32", "gradients accumulate in fp32 main-grad buffers and are reduced in fp32 "
                                             "(under --bf16 Megatron turns it on unless --grad-reduce-in-bf16 or "
                                             "--main-grads-dtype bf16)"},
      {"grad_reduce_in_bf16", "under --bf16 the gradient buffer is bf16: the backward accumulates and the data-parallel "
                              "all-reduce / reduce-scatter run in bf16, and the optimizer widens the reduced gradients "
                              "to fp32"},
      {"use_precision_aware_optimizer", "Adam with its moments stored in --exp-avg-dtype / --exp-avg-sq-dtype as "
                                        "Transformer Engine's FusedAdam stores them (fp16 and fp8 with a per-tensor "
                                        "scale), updated in fp32; checkpoints hold them unscaled in fp32, as Megatron's"},
      {"optimizer_cpu_offload", "Megatron's HybridDeviceOptimizer: Adam (or SGD) with fp32 moments and fp32 main "
                                "parameters whatever --exp-avg-dtype, --exp-avg-sq-dtype and --main-params-dtype say "
                                "(it needs --use-precision-aware-optimizer, as Megatron asks); mactor's optimizer "
                                "runs in host memory on the CPU (refused with MACTOR_DEVICE=cuda, where it runs "
                                "on the GPU)"},
      {"main_grads_dtype", "bf16 gives a bf16 gradient buffer under --bf16 (as --grad-reduce-in-bf16)"},
      {"main_params_dtype", "fp16 under --use-precision-aware-optimizer: the master weights of a 16-bit model "
                            "stored as fp16 with a per-tensor scale as TE's FusedAdam stores them (the model takes "
                            "each step's fp32 update; the next step starts from the fp16 values); kept beside an "
                            "fp32 working copy, so the memory is not saved"},
      {"exp_avg_dtype", ""},
      {"exp_avg_sq_dtype", ""},
      {"attention_softmax_in_fp32", "the attention softmax is computed in fp32 whatever the model's dtype"},
      {"fp16", "fp16 weights, activations and transfers with fp32 main parameters, as --bf16, plus Megatron's "
               "dynamic loss scaler: a step with an inf/NaN gradient is skipped and the scale backs off"},
      {"loss_scale", "a constant loss scale (fp16, or bf16 where Megatron also honours it)"},
      {"fp8", "the transformer layers' linears round their GEMM operands through fp8 as Transformer Engine "
              "quantizes them (e4m3: every operand e4m3; hybrid: gradients e5m2) and multiply in fp32 (CPU "
              "emulation); the embedding and output layer stay in the model's dtype; the delayed recipe's "
              "amaxes are max-reduced over the tensor-, data- and context-parallel ranks of a stage"},
      {"fp8_recipe", "delayed (amax history), tensorwise (current per-tensor scale), mxfp8 (E8M0 scale per "
                     "32 elements), blockwise (power-of-two scale per 1x128 activation tile, 128x128 weight tile)"},
      {"fp8_margin", "delayed recipe"},
      {"fp8_amax_history_len", "delayed recipe; updated after each forward and each backward, as TE does; the histories "
                               "and scales are saved in checkpoints (every --ckpt-format) and resume bit for bit; "
                               "resuming with another length exits 2"},
      {"fp8_amax_compute_algo", "delayed recipe"},
      {"fp8_wgrad", "delayed recipe only, as Megatron passes it (override_linear_precision)"},
      {"fp8_param_gather", "with the distributed optimizer the fp8-GEMM weights are held as fp8 (one byte each and a "
                           "per-tensor scale_inv): after each step every rank casts its fp32 main-parameter shard to fp8 "
                           "as TE's cast_master_weights_to_fp8 does (delayed: the weight's history scale, amax recorded "
                           "and max-reduced over the shard group; tensorwise: the scale of the whole weight's "
                           "max-reduced amax), the all-gather moves those bytes, and the linears multiply them "
                           "directly; checkpoints hold the fp32 main parameters (a torch-format model file the fp8 weights "
                           "dequantized). The 16-bit value buffer no longer holds these weights: their parameter "
                           "memory is halved under bf16"},
      {"first_last_layers_bf16", ""},
      {"num_layers_at_start_in_bf16", ""},
      {"num_layers_at_end_in_bf16", ""},
      {"initial_loss_scale", ""},
      {"min_loss_scale", ""},
      {"loss_scale_window", ""},
      {"hysteresis", ""},
      {"num_distributed_optimizer_instances", "the distributed optimizer shards over consecutive parts of the data x "
                                              "context-parallel group (Megatron's intra-partial groups) and sums each "
                                              "shard over the parts (inter-partial); experts on groups of their own "
                                              "shard over consecutive parts of the expert-data-parallel group, summed "
                                              "over the same inter-partial group; the first part saves the shards; "
                                              "with Megatron FSDP's sharded gradients (hybrid sharding, HSDP) the "
                                              "parameters and gradients shard over the intra-partial group too, each "
                                              "backward's gradients reduce-scattered there and the shards summed over "
                                              "the instances once a step"},
      {"expert_tensor_parallel_size", "the expert process groups (Megatron's expert RankGenerator: etp-ep-dp-pp order, the "
                                      "world divisible by etp x ep x pp, checked at start); above 1 (tp by default): each "
                                      "expert's fc1 rows and fc2 columns split over the expert-tensor-parallel group, "
                                      "which all-gathers the rows routed to its experts and reduce-scatters the "
                                      "outputs; 1: whole experts; checkpoints hold whole experts either way"},
      {"use_tp_pp_dp_mapping", "ranks in Megatron's tp-cp-ep-pp-dp order (data parallel slowest); every group "
                               "equal to Megatron-Core's RankGenerator"},
      {"pretrained_checkpoint", "loaded as with --finetune when --load holds no checkpoint (Megatron's fallback, with its "
                                "message); neither holding one is an error naming both"},
      {"load_main_params_from_ckpt", "with --no-load-optim a 16-bit model's fp32 main parameters come from the checkpoint; "
                                     "without it they are rebuilt from the 16-bit weights, as Megatron's reload_model_params"},
      {"log_progress", "progress.txt in --save: 'Starting job' when training starts and, after each save, the job's and "
                       "the cumulative throughput (model TFLOP/s per rank), FLOPs and tokens so far; the FLOPs count "
                       "travels in checkpoints. The job's time starts when training starts (Megatron's at program start)"},
      {"use_checkpoint_args", "the model arguments --load's checkpoint saved replace the command line's as Megatron's "
                              "load_args_from_checkpoint does (forced ones always, the others where not given), "
                              "with its messages, before validation"},
      {"use_mp_args_from_checkpoint_args", "with --use-checkpoint-args also the tensor-, pipeline- and expert-parallel "
                                           "sizes and the layers per virtual stage"},
      {"use_tokenizer_model_from_checkpoint_args", "with --use-checkpoint-args the checkpoint's --tokenizer-model too "
                                                   "(the --no- form keeps the command line's)"},
      {"padded_vocab_size", "the model's vocabulary as given, unpadded (Megatron's build_tokenizer skips its padding then)"},
      {"log_energy", "energy per GPU (J/iter/GPU) and power per GPU (W/GPU) in the log line, TensorBoard's "
                     "iter-energy/gpu and power/gpu, and the total at the end, from the CPU packages' RAPL counters "
                     "(one reading per host, training steps only); without readable counters a one-line warning"},
      {"rerun_mode", "Megatron's rerun state machine (training/result_validation): validate_results checks each micro-batch's "
                     "local loss, reruns a rejected iteration on the same micro-batches on every rank (agreed world-wide) and "
                     "exits 17 (not reproduced; checkpoint saved) or 16 (reproduced; checkpoint saved); disabled raises on a "
                     "rejected loss. The machine's state is not saved in checkpoints (a resumed job starts afresh)"},
      {"error_injection_rate", "one validation in N rejected (Megatron's injector; mactor's own random stream)"},
      {"error_injection_type", "the injected result's diagnostic, as Megatron's injector decides the reruns' comparisons"},
      {"check_for_nan_in_loss_and_grad", "each micro-batch's local loss checked for NaN and Inf by the result validation "
                                         "(Megatron's per-bucket gradient-norm checks are not made)"},
      {"check_for_spiky_loss", "a local loss at or above 10x the largest of the first 100 is rejected (result validation)"},
      {"check_for_large_grads", "each gradient bucket's local L2 norm, before any reduction, at or above 10x the largest of "
                                "the first 100 is rejected (result validation, non-fatal: a rerun). Buckets: one per chunk, "
                                "the tied embedding apart with the distributed optimizer, or --overlap-grad-reduce's. Under --use-megatron-fsdp or "
                                "--use-torch-fsdp2 nothing is checked, as in Megatron (only its DDP buffers check)"},
      {"result_rejected_tracker_filename", "Megatron's tracker lines (ts, node, device, jobID, rank, iteration, status, result, "
                                           "message) appended on each rejection and rerun"},
      {"log_straggler",
       "Megatron's StragglerDetector report after each log interval's line: each rank's forward time (the model "
       "calls, batch loads left out) and batch-load time, the fastest and slowest rank of each and the estimated "
       "throughput per rank, in Megatron's format (CPU timings; the GPU's power, temperature, utilization and clock "
       "print 0)"},
      {"straggler_minmax_count",
       "with 1 < N < world size, Megatron's '^^^^ Bottom/Top N Ranks' throughput lines follow the report"},
      {"disable_straggler_on_startup", "the detector starts off (no reports) until toggled on the controller port"},
      {"straggler_ctrlr_port",
       "rank 0 serves HTTP on 0.0.0.0:PORT as Megatron's controller: any request toggles the detector at the next "
       "log interval (answer and log lines as Megatron's)"},
      {"distributed_timeout_minutes",
       "a rank whose status reports stop, or whose stage stays in one wait or step, this long is declared hung: "
       "rank 0 prints the ranks and what each was doing and the job ends with exit 18 (needs the status reports: "
       "not under MACTOR_INSPECT=off)"},
      {"distributed_timeout_seconds_after_init",
       "the hang timeout once the first iteration after start is done, as Megatron's update_pg_timeout"},
      {"exit_signal_handler", "SIGTERM is remembered; at the end of the iteration it arrived in (on any rank) the job "
                              "saves (with --save) and exits 0 with Megatron's 'exiting program after receiving "
                              "SIGTERM.'; give mactor a --kill-grace long enough for the save"},
      {"ddp_average_in_collective", "the gradients' 1/dp moves into the data-parallel reduction; mactor's reduction "
                                    "pre-multiplies each replica's gradient by 1/dp as NCCL's ncclAvg does for floats, "
                                    "so the values equal the default's; refused with --calculate-per-token-loss as in Megatron"},
      {"calculate_per_token_loss", "each micro-batch's loss summed, not averaged; gradients summed over the replicas "
                                   "and divided by the global batch's token count (Megatron's finalize_model_grads)"},
      {"check_weight_hash_across_dp_replicas_interval", "every replica hashes its parameters and the replicas "
                                                        "compare them at the interval: a mismatch ends the job naming the "
                                                        "parameters, a match prints Megatron's line"},
      {"use_te_activation_func",
       "under Megatron-Core's TE specs (--transformer-impl transformer_engine) the MLPs' and experts' activation is "
       "Transformer Engine's op: GELU by the tanh formula (mactor's tanh GeLU kernel, the fused bias-GeLU's; TE rounds "
       "its last bit its own way) and SwiGLU without --activation-func-clamp-value or --glu-linear-offset; the local "
       "spec keeps the plain activation. Megatron's refusals: with bias activation fusion, with --squared-relu, "
       "--quick-geglu or --openai-gelu, and --swiglu without TE's module"},
      {"squared_relu", "relu(x)^2 as the MLP's activation (checked against PyTorch, fp32 and bf16)"},
      {"use_fused_weighted_squared_relu", "TEGroupedMLP's experts (--moe-grouped-gemm with --squared-relu) apply the routing "
                                          "probability inside the activation, as Megatron's weighted_squared_relu under "
                                          "torch.compile: relu(x)^2 * p and the input gradient (dy * p) * 2 relu(x) each "
                                          "rounded to 16 bits once, the probability's gradient the fp32 row sum of "
                                          "relu(x)^2 dy, and relu(x)^2 not kept for the backward; SequentialMLP, the legacy "
                                          "GroupedMLP and other activations ignore it, as in Megatron"},
      {"quick_geglu", "a gated MLP, quick_gelu(gate) * linear with quick_gelu(x) = x * sigmoid(1.702 x) (checked "
                      "against PyTorch, fp32 and bf16, and tp = 1/2/4); like Megatron-Core's dense MLP it needs "
                      "--no-bias-gelu-fusion or --disable-bias-linear"},
      {"activation_func_clamp_value", "where Megatron's unfused GLU applies it (--quick-geglu, or --swiglu with "
                                      "--no-bias-swiglu-fusion): the gate clamped to at most c and the linear half "
                                      "to [-c, c] before the activation; the fused SwiGLU and non-gated MLPs ignore it, "
                                      "as there"},
      {"glu_linear_offset", "act(gate) * (linear + offset) in the unfused GLU (--quick-geglu, or --swiglu with "
                            "--no-bias-swiglu-fusion); with a fused bias activation only --quick-geglu takes it, as "
                            "TransformerConfig rules"},
      {"embedding_init_method_std", "the word and position embeddings draw normal(0, std) (the tied output weight "
                                    "is the word embedding); given at all, every parameter named 'embedding' skips "
                                    "weight decay, as Megatron's optimizer does"},
      {"init_method_xavier_uniform", "uniform(+-sqrt(6 / (fan_in + fan_out))) of the full tp = 1 weight (Megatron's CPU "
                                     "initialization) for every weight of init_method and output_layer_init_method: "
                                     "linears, the output layer, and the embeddings unless --embedding-init-method-std "
                                     "differs from --init-method-std. Megatron core_v0.15.0 itself stops with a "
                                     "TypeError here (it passes TransformerConfig a 'scaled_init_method' it does not have); "
                                     "mactor does what the flag and its config mapping intend"},
      {"fp32_residual_connection", "the residual stream (embedding output, layer inputs and outputs, their gradients, "
                                   "pipeline transfers) in fp32; norms read it and write the model's dtype"},
      {"recompute_granularity", "full: a checkpointed group keeps only its input and reruns its forward before its "
                                "backward; selective: the modules --recompute-modules names drop their activations and "
                                "rerun in the backward. Same losses bit for bit, less activation memory (bench/bench_precision)"},
      {"recompute_activations", "selective recomputation of the attention core, as Megatron maps it"},
      {"recompute_method", "uniform: groups of --recompute-num-layers layers per chunk; block: the first "
                           "--recompute-num-layers layers of each chunk, the rest keep their activations"},
      {"recompute_num_layers", ""},
      {"recompute_modules", "core_attn (softmax probabilities), layernorm (both norms' outputs), mlp (fc1 output and "
                            "activation), moe (a MoE layer frees its activations after the forward and reruns it at the start of its backward: the same routing, noise and numbers); moe_act and shared_experts keep their activations; mla_up_proj keeps MLA's up-projection "
                            "activations (the values recomputation would give)"},
      {"distribute_saved_activations", "each tensor-parallel rank keeps 1/tp of a checkpointed group's input and "
                                       "all-gathers it before the rerun"},
      {"deterministic_mode", "Megatron's rules (no flash attention, no fused cross-entropy, NCCL_ALGO one of Tree, "
                             "Ring, CollnetDirect, CollnetChain, ^NVLS); mactor's kernels and collectives reduce in "
                             "a fixed order, so a job run twice logs the same bits with or without it"},
      {"non_persistent_save_interval", "with --non-persistent-ckpt-type global or local, a checkpoint every N "
                                      "iterations (where --save-interval does not save) to the non-persistent "
                                      "directory; it spares the exit's own save as Megatron's does"},
      {"non_persistent_ckpt_type", "global: ordinary checkpoints (--ckpt-format's) in <save>/non_persistent or "
                                   "--non-persistent-global-ckpt-dir; rank 0 removes all but the newest before each "
                                   "save; a load takes it when it is at least as new as the persistent one. local: "
                                   "each rank commits its whole state alone under --non-persistent-local-ckpt-dir/"
                                   "rank_N (keeping its 2 newest); --load takes the newest iteration every rank holds "
                                   "when it is at least as new as the persistent one"},
      {"non_persistent_global_ckpt_dir", "the non-persistent global checkpoints' directory, for saving and loading"},
      {"non_persistent_local_ckpt_dir", "the local checkpoints' directory: rank N saves to and loads from its rank_N"},
      {"inprocess_restart", "under `mactor -np N`, a rank that dies or hangs is started again as a new process "
                            "under its rank while the others restart in place (same process, a fresh rendezvous); all "
                            "resume from the newest checkpoint they share (best a replicated local one in memory); on "
                            "other hosts through the rank's remote supervisor"},
      {"inprocess_active_world_size", "under mactor -np N, the processes past this many wait as spares (NVRx's warm "
                                      "reserve; also mactor --spares): a failed rank's place goes to a spare, which "
                                      "restarts in place as that rank, and a new spare takes the freed place"},
      {"inprocess_max_iterations", "the in-job restarts allowed (no limit when not given); past it the job ends as "
                                   "without --inprocess-restart"},
      {"inprocess_soft_timeout", "under --inprocess-restart a rank without progress this long after the first iteration "
                                 "is hung (the distributed timeout, when shorter, still applies)"},
      {"inprocess_hard_timeout", "a rank that has not joined an in-job restart this long after it began is killed and "
                                 "started again"},
      {"enable_ft_package", "NVIDIA Resiliency Extension's fault-tolerance sections around the training loop, as "
                            "Megatron's ft_integration: setup (start to the first step), step (each training step after "
                            "the first), checkpointing (each save), and out-of-section; one open past its timeout "
                            "(mactor --ft-param-rank_section_timeouts / --ft-param-rank_out_of_section_timeout, as "
                            "ft_launcher's, or <save>/ft_state.json) ends the job as hung (exit 18, a --max-restarts "
                            "restart); needs --save"},
      {"calc_ft_timeouts", "with --enable-ft-package, timeouts calculated from the times seen (longest x 5, averaged "
                           "with the previous) after each save and at the end, by Megatron's rules (setup after a "
                           "persistent load, step after 16 steps, checkpointing after a synchronous save, "
                           "out-of-section at the end), written to <save>/ft_state.json in the rank monitor's format "
                           "and loaded by the next run"},
      {"replication", "after each local non-persistent save, every rank sends its checkpoint to the other ranks of its "
                      "replication clique (NVIDIA Resiliency Extension's CliqueReplicationStrategy) and keeps theirs under "
                      "<local dir>/rank_N/replicas; a resume takes the newest iteration held for every rank, and a rank "
                      "that lost its own copy receives it from a peer"},
      {"replication_jump", "J: a clique is ranks n, n+J, ..., n+(F-1)J (set J to the ranks per node so copies live on "
                           "other nodes)"},
      {"replication_factor", "F: the ranks of a clique, each holding all F copies"},
      {"non_persistent_local_ckpt_algo", "fully_parallel and atomic load the same state; each rank writes its whole "
                                         "state (atomic's layout): fully_parallel's de-duplication of data-parallel "
                                         "replicas on disk is not done"},
      {"save_retain_interval", "once a save is tracked, the checkpoint tracked before it is deleted unless its "
                               "iteration is a multiple of the interval (or it is a symbolic link), as Megatron does"},
      {"dist_ckpt_strictness", "every mode, in dist_checkpointing's terms: a tensor this model asks for that the "
                               "checkpoint lacks fails the load (assume_ok_unexpected, raise_*), or is named and kept "
                               "at its initial value (log_*, return_*), or not (ignore_all); *_all also names the "
                               "checkpoint's tensors no rank uses"},
      {"record_memory_history", "every tensor allocation and free (the last 100000) with the blocks alive, by memory kind"},
      {"memory_snapshot_path", "the last rank writes torch.cuda.memory._snapshot()'s pickled dict there at each log "
                               "interval, for PyTorch's memory viewer (pytorch.org/memory_viz)"},
      {"profile", "a Chrome trace-event file for each profiled rank, of mactor's own spans (forward and backward of "
                  "each micro-batch and chunk, waits for input, pipeline sends and receives with bytes and peer, "
                  "data-parallel collectives, the timed parts of the step, each iteration), for ui.perfetto.dev or "
                  "chrome://tracing; without --use-pytorch-profiler Megatron records with nsys, which mactor does not "
                  "have: it writes the same trace for nsys's capture range (iterations start + 1 to end)"},
      {"profile_step_start", "in global iterations, as its help says: --use-pytorch-profiler traces start to end - 1 "
                             "(what torch.profiler's schedule records), without it start + 1 to end"},
      {"profile_step_end", "must be greater than --profile-step-start (torch.profiler's schedule asserts it)"},
      {"profile_ranks", "global ranks of the job; one that is not (Megatron then profiles nothing) is refused"},
      {"use_pytorch_profiler", "the trace goes into --tensorboard-dir as rank<N>.<time_ns>.pt.trace.json "
                               "(tensorboard_trace_handler's name, the rank as worker name), else to "
                               "mactor_trace_rank<N>.json in the current folder; it holds mactor's spans, not "
                               "PyTorch operators"},
      {"log_memory_to_tensorboard", "mem-reserved-bytes (resident set), mem-allocated-bytes and mem-max-allocated-bytes "
                                    "(the memory ledger: every tensor's and the optimizer state's bytes) of rank 0; "
                                    "no mem-allocated-count"},
      // Mixture of experts (model/moe_layer) and expert parallelism (model/moe_expert_exchange).
      {"expert_model_parallel_size", "the experts split in equal blocks over the expert-parallel group (Megatron's "
                                     "expert rank order); tokens travel by an all-to-all to their experts' ranks and "
                                     "back; expert gradients reduce (and shard, with the distributed optimizer) over "
                                     "the expert-data-parallel group; checkpoints name experts by global number, so "
                                     "any expert-parallel size loads them; not with "
                                     "--num-distributed-optimizer-instances > 1"},
      {"num_experts", "MoE layers (router, token permutation, experts without bias) in place of the MLP; under fp8 "
                      "each expert's fc1 and fc2 is its own fp8 GEMM, scaled by its own tokens (TE GroupedLinear's "
                      "per-GEMM quantizers; the router stays in the model's dtype); refused with biases "
                      "(add --disable-bias-linear) and --fp8-param-gather; the log line and TensorBoard get track_moe_metrics' z_loss and "
                      "(seq_)load_balancing_loss (per micro-batch mean, summed over the pipeline, averaged over the "
                      "replicas and the MoE layers)"},
      {"moe_router_enable_expert_bias", "sigmoid scores plus a per-expert fp32 bias choose the top k (the "
                                        "probabilities stay unbiased); after each global batch the bias moves by the "
                                        "update rate towards balance, from the kept tokens per expert summed over the "
                                        "replicas (Megatron's _update_router_expert_bias); saved as router.expert_bias"},
      {"moe_router_bias_update_rate", ""},
      {"moe_router_dtype", "fp32 or fp64: the router's input and weight widened for its GEMM, its gradients computed "
                           "there and rounded back (Megatron's router_gating_linear); the routing itself runs in double"},
      {"moe_per_layer_logging", "TensorBoard scalars moe/<name>_layer_<i> for every layer, as track_moe_metrics"},
      {"mtp_num_layers", "Megatron-Core's MultiTokenPredictionBlock on the last pipeline stage: each depth embeds the ids "
                         "rolled one place further (the word table; off the first stage a copy summed with the first "
                         "stage's, tied or untied, as Megatron's shared embedding), applies enorm and hnorm, eh_proj (column-parallel, "
                         "gathered), one layer of the decoder's last layer's spec and a final norm, and scores the rolled "
                         "labels with the shared output layer; the losses enter the backward as MTPLossAutoScaler makes "
                         "them and are logged as 'mtp_<k> loss' (checked against PyTorch; tp, sp, pp, dp, cp: rolled over the whole sequence); under fp8 a depth's "
                         "eh_proj and layer run fp8 whatever --first-last-layers-bf16 says (Megatron's global fp8 "
                         "context for MTP); with --calculate-per-token-loss each depth's loss sum scaled as the LM loss's; refused with --fp32-residual-connection and "
                         "FSDP's sharded gradients over pipeline stages; 'm' in --pipeline-model-parallel-layout goes in the last stage with 'L', as "
                         "Megatron requires"},
      {"mtp_loss_scaling_factor", "the MTP losses' weight in the backward: factor / depths times each depth's masked mean"},
      {"moe_layer_freq", "an int N (layers 0, N, 2N, ... 0-based) or the list form, one 0/1 per layer"},
      {"moe_ffn_hidden_size", "each expert's fc2 input width (fc1 twice that with a gated unit)"},
      {"moe_router_topk", ""},
      {"moe_expert_capacity_factor", "each expert keeps at most ceil(tokens * topk / experts * factor) routed tokens "
                                     "(Megatron's apply_router_token_dropping); the dropped ones skip that expert"},
      {"moe_token_drop_policy", "probs keeps an expert's highest-probability tokens, position its first ones"},

      {"moe_shared_expert_intermediate_size", "a shared expert MLP (mlp.shared_experts.linear_fc{1,2}, the model's "
                                              "activation) every token goes through, added to the routed output"},
      {"moe_router_pre_softmax", "softmax over all experts, then the top k (otherwise softmax over the top k logits)"},
      {"moe_router_topk_scaling_factor", "multiplies the routing probabilities"},
      {"moe_router_score_function", "softmax, or sigmoid with the top k scores normalized by their sum (k > 1); the "
                                    "aux loss on the sigmoid normalized over the experts"},
      {"moe_router_num_groups", "the experts in that many equal groups for --moe-router-group-topk"},
      {"moe_router_group_topk", "each token's groups: the top group_topk by the sum of their top (k / group_topk) "
                                "scores, then its top k experts inside them (Megatron's group_limited_topk)"},
      {"moe_router_load_balancing_type", "aux_loss, seq_aux_loss, none and sinkhorn (in training the top k of the "
                                         "Sinkhorn-balanced exp(logits) of the micro-batch, in evaluation of the scores; "
                                         "probs = sigmoid for k = 1, else the softmax over all experts, no aux loss); "
                                         "the list form (aux_loss seq_aux_loss, one --moe-aux-loss-coeff each) adds "
                                         "both losses and logs both, and ignores none and sinkhorn in a list as Megatron "
                                         "does; global_aux_loss: aux_loss with the tokens per expert summed over "
                                         "every tensor-, data- and context-parallel rank and averaged over the global "
                                         "batch's micro-batches so far, logged as global_load_balancing_loss"},
      {"delay_wgrad_compute",
       "with expert parallelism, a MoE layer's backward computes the experts' input gradients first and runs their "
       "weight-gradient GEMMs while the dispatch's all-to-all carries those input gradients back (on a side thread), "
       "as Megatron's EP-overlap schedule delays the experts' wgrad behind that all-to-all; the same numbers bit for "
       "bit. The attention's weight gradients are not delayed (Megatron delays them too, behind the next layer's "
       "exchange inside its combined 1F1B step, which mactor runs as a forward then a backward). Under --pipeline-schedule zb-h1/zbv the schedule's W pass takes the weight "
       "gradients instead"},
      {"moe_router_padding_for_fp8", "each expert's rows padded to a multiple of 16 (32 under mxfp8) with the first "
                                     "tokens not routed to it, of probability 0, as Megatron's pad_routing_map in the "
                                     "alltoall dispatcher (each rank's own tokens, before the all-to-all): the outputs "
                                     "are unchanged, the experts' fp8 amaxes and scales see the padding rows, and the "
                                     "all-to-all moves them; Megatron's rules (fp8 on, not the allgather dispatcher)"},
      {"moe_apply_probs_on_input", "the routing probability multiplies each expert's input rows instead of the "
                                   "activation's output (top-1 only, as Megatron asserts)"},
      {"moe_layer_recompute", "selective recomputation with the moe module (and core_attn unless --recompute-modules "
                              "names others), as Megatron maps it: each MoE layer frees its activations after the "
                              "forward and reruns it in the backward, the same losses bit for bit"},
      {"moe_router_force_load_balancing", "the router's logits replaced by standard normal draws of their dtype "
                                          "(training and evaluation, as Megatron's RandomSTE), their gradient passed "
                                          "straight to the gating GEMM; drawn from a counter stream of --seed, the layer "
                                          "and the micro-batch, not Megatron's torch generator seeded 42 + global rank"},
      {"moe_input_jitter_eps", "the router's input times uniform(1 - eps, 1 + eps) noise of the input's dtype, in "
                               "training and evaluation as Megatron's apply_input_jitter (not Megatron's torch RNG "
                               "stream: a counter-based one from --seed, the layer and the micro-batch, redrawn the "
                               "same on recompute); the gradient flows through the noise to the input"},
      {"moe_aux_loss_coeff", "one value, or one per --moe-router-load-balancing-type entry; each loss's gradient enters the router's logits scaled by the loss scale / "
                             "the micro-batch count (times the local tokens with --calculate-per-token-loss), as "
                             "MoEAuxLossAutoScaler"},
      {"moe_z_loss_coeff", "the router z-loss mean(logsumexp(logits)^2) * coeff, its gradient scaled as the aux loss's"},
      {"moe_use_upcycling", "the MoE model's first weights from the dense checkpoint in --load, as Megatron-Core's "
                            "upcycling_utils converts them (expert e: slice e % g of the dense MLP, scaled; the router's "
                            "rows repeated g times), saved to --save at iteration 1 before training goes on; --save "
                            "must hold no checkpoint, and the optimizer and RNG state are not loaded"},
      {"moe_upcycling_granularity", "g: the dense model's FFN is --ffn-hidden-size x g wide (checked against the "
                                    "checkpoint) and each expert is one of its g slices"},
      {"moe_grouped_gemm", "the experts' weights under TEGroupedMLP's names (experts.linear_fc1.weight<i>); on the CPU "
                           "the grouped GEMM runs every local expert at once over the threads (each expert's GEMMs "
                           "whole on one thread) where SequentialMLP's loop runs them one after the other"},
      {"moe_use_legacy_grouped_gemm", "with --moe-grouped-gemm, Megatron's legacy GroupedMLP: its GEMMs stay in 16 bits "
                                      "under fp8 (grouped_gemm's gmm is not a Transformer Engine module), its gated unit "
                                      "ignores --activation-func-clamp-value and --glu-linear-offset, and each expert is "
                                      "saved under SequentialMLP's names (experts.local_experts.<i>.linear_fc1.weight, as "
                                      "its sharded state dict; the torch format too, where Megatron saves weight1/weight2); "
                                      "GroupedMLP's rules: a gated unit needs silu (not --quick-geglu), and --recompute-modules "
                                      "moe_act with fp8 is refused; without --moe-grouped-gemm it changes nothing, as in Megatron"},
      {"moe_token_dispatcher_type", "allgather, alltoall and flex move the same rows to the same experts: the "
                                    "alltoall exchange (a rank's tokens to its experts' ranks) serves all three; flex "
                                    "with Megatron's checks (--moe-enable-deepep, expert TP x EP > 1, no capacity padding)"},
      {"moe_enable_deepep", "the flex dispatcher's backend: DeepEP's fused dispatch and combine send each token to the "
                            "ranks of its top-k experts and sum the results back, which mactor's alltoall exchange does"},
      {"spec", "pretrain_mamba: 'megatron.core.models.mamba.mamba_layer_specs mamba_stack_spec' builds MambaModel's "
               "hybrid stack (required, as mamba_builder requires it); pretrain_gpt: 'local' or gpt_layer_specs' "
               "get_gpt_layer_local_spec / get_gpt_layer_with_transformer_engine_spec, the layers mactor builds anyway; "
               "any other spec is refused with the known ones"},
      {"hybrid_attention_ratio", "pretrain_mamba: the share of attention-only layers, placed as Megatron's "
                                 "allocate_layers places them (pretrain_gpt ignores it, as Megatron's does)"},
      {"hybrid_mlp_ratio", "pretrain_mamba: the share of MLP-only layers, placed as allocate_layers places them "
                           "(pretrain_gpt ignores it, as Megatron's does)"},
      {"hybrid_override_pattern", "pretrain_mamba: one of M (Mamba), * (attention only), - (MLP only) per layer, "
                                  "checked against the ratios as allocate_layers checks it"},
      {"mamba_state_dim", "the Mamba-2 mixer's state size N (the mixer split over TP ranks as Megatron splits it: "
                          "heads and groups per rank, in_proj and conv1d by segments)"},
      {"mamba_head_dim", "the Mamba-2 mixer's head size P"},
      {"mamba_num_groups", "the Mamba-2 mixer's B/C groups (each group's heads share B and C; the gated norm is per group)"},
      {"mamba_num_heads", "the Mamba-2 mixer's heads (default 2 * hidden / head_dim)"},
      {"is_hybrid_model", "Megatron's TransformerConfig.is_hybrid_model: output_layer_init_method draws the MLP's fc2 "
                          "(and MoE's) with std / sqrt(num_layers) instead of std / sqrt(2 num_layers) (the attention "
                          "projection keeps sqrt(2 num_layers) for now), in pretrain_gpt and pretrain_mamba; the throughput's FLOPs "
                          "are Megatron's hybrid_flops (attention, MLP and Mamba layers counted from the pattern or ratios)"},
      {"disable_mamba_mem_eff_path", "Megatron's unfused mixer path instead of mamba_chunk_scan_combined's fused "
                                     "one: the same numbers; mactor's CPU mixer has one path, which it runs either way"},
  };
  return table;
}

}  // namespace mactor::config::detail

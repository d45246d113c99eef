// One rank's share of the training step: its model chunks, run by the schedule coroutine. The
// engine executes the schedule's compute actions itself and hands the rest to two parts:
// the pipeline port (transfers between stages) and grad sync (data-parallel reduction, the
// distributed optimizer's gather, their overlap), then steps the optimizer.
// Knows no actor: a driver calls pump() until it reports the schedule finished, and is woken by
// the wakeup callback when a transfer completes (an actor turns that into a message).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "config/megatron_args.hpp"
#include "model/gpt_chunk.hpp"
#include "model/grad_scaler.hpp"
#include "model/optimizer.hpp"
#include "schedules/generator.hpp"
#include "schedules/schedule.hpp"
#include "tensor/default_device.hpp"
#include "training/batch_loader.hpp"
#include "config/data_parallel_sharding.hpp"
#include "training/grad_sync.hpp"
#include "training/main_grads.hpp"
#include "training/fp16_main_params.hpp"
#include "training/fp8_params.hpp"
#include "training/fsdp_residency.hpp"
#include "training/main_params.hpp"
#include "training/moe_metrics.hpp"
#include "training/parallel_context.hpp"
#include "training/pipeline_port.hpp"
#include "training/stage_activity.hpp"
#include "training/stage_layout.hpp"
#include "training/step_timers.hpp"
#include "training/trace_recorder.hpp"
#include "training/traced_group.hpp"

namespace mactor::training {

/// One operation of the last schedule on this rank, for timelines and the bubble benchmark.
struct timeline_entry {
  schedules::action what;
  double start_s = 0, end_s = 0;  ///< seconds since the schedule began
  bool waiting = false;           ///< true: time spent waiting for this action's input
};

class stage_engine {
 public:
  stage_engine(const config::megatron_args& args, parallel_context& ctx, std::int64_t padded_vocab_size);

  /// Called from any thread when a transfer completes; the driver then calls pump() again.
  void set_wakeup(std::function<void()> wakeup) { wakeup_ = std::move(wakeup); }

  /// Starts one pass of the schedule over `num_microbatches` micro-batches read from `loader`
  /// at `consumed` samples: forward and backward (training) or forward only (evaluation).
  void begin_schedule(bool forward_only, const batch_loader& loader, std::int64_t consumed, int num_microbatches,
                      bool cyclic);
  /// Runs actions until one has to wait for a transfer; true once the schedule and every send
  /// have finished. Throws comm::comm_error naming the peer of a failed transfer.
  bool pump();
  /// Loss sum and token count of the last schedule, on the last pipeline stage (zero elsewhere).
  model::loss_and_count loss_totals() const { return totals_; }
  /// Each micro-batch's local loss sum of the last schedule, in micro-batch order (last stage;
  /// empty elsewhere): the results Megatron's loss_func validates before the data-parallel sum.
  const std::vector<double>& microbatch_losses() const { return microbatch_losses_; }
  /// The MoE layers' auxiliary losses of the last training schedule, as Megatron's
  /// track_moe_metrics takes them: per name (load_balancing_loss, seq_load_balancing_loss,
  /// z_loss) and global layer, summed over the micro-batches and divided by their count
  /// ([3 * num_layers], zero for the layers of other stages); empty without MoE.
  std::vector<double> moe_aux_losses() const;
  /// Multi-token prediction: each depth's masked mean loss over this iteration's micro-batches
  /// (Megatron's tracker times 1 / micro-batches); empty off the last stage or without MTP.
  /// Clears the chunks' trackers.
  std::vector<double> mtp_losses();
  /// What the schedule is doing or waiting for right now, e.g. "awaiting recv_backward mb 7
  /// chunk 1 from rank 12", and since when.
  std::pair<std::string, std::chrono::steady_clock::time_point> activity() const;
  /// The last finished schedule's operations.
  std::vector<timeline_entry> last_timeline() const;
  /// Each MoE layer's tokens per expert in the last trained iteration, as this rank routed them
  /// (empty for a dense model). Read on the training thread, after the step.
  const std::vector<expert_load>& last_expert_load() const { return last_expert_load_; }
  /// The schedule's batch loads (--log-straggler): their total and longest seconds.
  struct batch_load_seconds {
    double total = 0, longest = 0;
  };
  batch_load_seconds batch_loads() const { return batch_loads_; }
  /// Data-plane bytes this rank has sent and received so far: pipeline transfers and every
  /// group's collectives (the transport's count of completed operations). Any thread.
  std::int64_t bytes_sent() const;
  std::int64_t bytes_received() const;
  void zero_grad();
  /// Megatron's finalize_model_grads: the tensor-parallel sum of sequence-parallel gradients,
  /// the tied-embedding sum between the first and last stage, the data-parallel mean, and the
  /// MoE routers' expert-bias update.
  void finalize_grads();
  /// --check-for-large-grads: each gradient bucket's local L2 norm of the last finalize (taken
  /// before any reduction), in the order measured.
  std::vector<double> take_local_grad_norms() { return grad_sync_->take_local_grad_norms(); }
  /// Clip, count zeros, update (and all-gather the parameters with the distributed optimizer).
  model::optimizer_step_result optimizer_step(double clip_grad, bool count_zeros);
  /// The L2 norm of all parameters of the model (every rank gets it).
  double params_norm();
  /// Waits for parameter all-gathers still running in the background (--overlap-param-gather):
  /// call before reading the parameters outside the schedule (checkpoints).
  void sync_params() { grad_sync_->wait_param_sync(); }
  /// Megatron's check_param_hashes_across_dp_replicas: throws std::runtime_error naming the
  /// parameters whose bytes differ between this rank and another data-parallel replica.
  void check_weight_hashes_across_replicas();
  /// --test-mode: the --qk-layernorm weights compared across the tensor- and data-parallel ranks
  /// (training/qk_norm_check.hpp), after any parameter all-gather landed.
  void check_qk_norms();
  /// Gradient buckets reduced in the background during the last backward (--overlap-grad-reduce).
  std::size_t num_grad_buckets() const { return grad_sync_->num_buckets(); }
  model::optimizer& optimizer() { return *optimizer_; }
  /// The loss scale (1 without one: fp32, or bf16 without --loss-scale).
  double loss_scale() const { return scaler_ ? scaler_->scale() : 1.0; }
  /// The fp16 loss scaler, or null.
  model::grad_scaler* scaler() { return scaler_ ? &*scaler_ : nullptr; }
  /// The fp32 main parameters (the model's values for an fp32 model): what checkpoints hold.
  training::main_params& main_params() { return *main_params_; }
  /// Where the chunks, their main parameters and the optimizer's state are (the host, or a GPU).
  tensor::device device() const { return device_; }
  /// The model's weights from the main parameters (after a checkpoint load into them): rounded
  /// into a 16-bit model, and cast to fp8 for the weights --fp8-param-gather holds as fp8.
  void model_params_from_main();
  /// Megatron's reload_model_params: the main parameters from the model's weights (a 16-bit
  /// model's values widened; an fp8 weight's fp8 values).
  void main_params_from_model();
  /// Null without --fp8-param-gather.
  training::fp8_params* fp8_params() { return fp8_params_.get(); }
  /// The training timers (--timing-log-level) of this rank: compute, waits, gradient sync and
  /// optimizer parts, recorded for training schedules only (Megatron stops its timers in evaluate).
  step_timers& timers() { return timers_; }
  /// --profile: this rank's trace (compute, waits, transfers, collectives and the timed parts),
  /// recording while an iteration of its window runs.
  trace_recorder& trace() { return trace_; }

  std::vector<model::gpt_chunk>& chunks() { return chunks_; }
  /// Fully sharded parameters (ZeRO-3 over more than one replica): the chunks' stores hold only
  /// their shards outside a compute.
  bool params_sharded() const { return fsdp_ && sharding_.shards_params(); }
  /// Whether this rank holds the loss (the last virtual stage: pipeline rank pp - 1, or rank 0
  /// under ZB-V's V) / the embedding (the first virtual stage, always on rank 0).
  bool is_last_stage() const {
    for (const auto& c : layout_.chunks)
      if (c.post_process) return true;
    return false;
  }
  bool is_first_stage() const { return layout_.pipeline_rank == 0; }
  int num_microbatches_in_flight() const;

 private:
  void finish_router_iteration();
  void hold_fp8_weights();
  void cast_fp8_weights();
  /// What parameter p of chunk c holds: its values, or the fp8 bytes of an fp8-held weight.
  tensor::const_tensor_view weight_bytes(std::size_t c, const model::parameter& p);
  bool execute(const schedules::action& a);
  bool input_ready(const schedules::action& a, tensor::tensor*& input);
  void run_forward(const schedules::action& a, const tensor::tensor* input, tensor::tensor& output);
  void run_backward(const schedules::action& a, const tensor::tensor* input, tensor::tensor& grad_input);
  void run_weight_pass(const schedules::action& a);
  void record(const schedules::action& a, std::chrono::steady_clock::time_point start, bool waiting,
              std::chrono::steady_clock::time_point end);
  void trace_compute(const schedules::action& a, std::chrono::steady_clock::time_point start, bool waiting,
                     std::chrono::steady_clock::time_point end);
  const batch_buffers& batch(int microbatch);
  void reduce_stats(std::span<double> values);

  const config::megatron_args& args_;
  parallel_context& ctx_;
  // Where the chunks compute (training/compute_device.hpp): every public call that runs model
  // code holds a default_device_scope of it, whatever thread the driver calls from.
  tensor::device device_;
  stage_layout layout_;
  config::sharding_plan sharding_;
  bool distributed_optimizer_;  // the optimizer state sharded over more than one replica
  bool stats_over_world_ = false;  // a MoE model: see reduce_stats
  trace_recorder trace_;
  std::unique_ptr<traced_group> traced_tp_;  // a profiled rank's tensor-parallel group (tp > 1)
  std::vector<model::gpt_chunk> chunks_;
  std::unique_ptr<training::main_params> main_params_;
  std::unique_ptr<training::main_grads> main_grads_;
  std::unique_ptr<training::fp8_params> fp8_params_;  // --fp8-param-gather
  std::unique_ptr<training::fp16_main_params> fp16_main_;  // --main-params-dtype fp16
  std::optional<model::grad_scaler> scaler_;
  std::function<void()> wakeup_;
  step_timers timers_;
  stage_activity activity_;
  pipeline_port port_;
  std::unique_ptr<grad_sync> grad_sync_;
  std::unique_ptr<fsdp_residency> fsdp_;  // FSDP's sharded gradients (and parameters), or null
  std::unique_ptr<model::optimizer> optimizer_;

  // The schedule in progress.
  std::optional<schedules::generator<schedules::action>> schedule_;
  std::optional<schedules::action> pending_;
  bool forward_only_ = false, cyclic_ = false;
  // ZB-H1 on a rank that runs weight passes after later backwards: the backward leaves its
  // weight gradients to the W action (model/deferred_weight_grads.hpp).
  bool defer_weight_grads_ = false;
  const batch_loader* loader_ = nullptr;
  std::int64_t consumed_ = 0;
  int num_microbatches_ = 0;
  std::map<int, batch_buffers> batches_;
  batch_load_seconds batch_loads_;  // since the schedule began
  model::loss_and_count totals_;
  std::vector<double> microbatch_losses_;
  std::vector<double> moe_losses_;  // sums over the schedule's forwards (see moe_aux_losses)
  std::chrono::steady_clock::time_point schedule_start_;
  std::optional<std::chrono::steady_clock::time_point> wait_start_;
  std::vector<timeline_entry> timeline_;
  mutable std::mutex timeline_mutex_;
  std::vector<timeline_entry> last_timeline_;
  std::vector<expert_load> last_expert_load_;
  void scale_by_global_tokens();
};

}  // namespace mactor::training

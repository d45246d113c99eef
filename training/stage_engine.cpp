// The stage engine: its chunks and the schedule's compute actions through the pipeline port;
// the optimizer side (gradients, statistics, the step) is in stage_engine_step.cpp.
#include "training/stage_engine.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "config/moe_layout.hpp"
#include "schedules/shape_from_args.hpp"
#include "training/chunk_params.hpp"
#include "training/compute_device.hpp"
#include "training/model_spec.hpp"

namespace mactor::training {
namespace {

using clock_type = std::chrono::steady_clock;
using schedules::action;
using schedules::op;

double seconds_between(clock_type::time_point from, clock_type::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

pipeline_position position_of(const stage_layout& l, const parallel_context& ctx) {
  pipeline_position p{l.pipeline_size, l.pipeline_rank, l.virtual_size, {}, l.placement};
  for (int s = 0; s < l.pipeline_size; ++s) p.stage_ranks.push_back(ctx.pipeline_rank_of(s));
  return p;
}

}  // namespace

stage_engine::stage_engine(const config::megatron_args& a, parallel_context& ctx, std::int64_t padded)
    : args_(a), ctx_(ctx), device_(compute_device(ctx.local_rank())), layout_(stage_layout_of(a, ctx)),
      sharding_(config::sharding_plan_of(a)),
      distributed_optimizer_(sharding_.shards_optimizer() && ctx.optimizer_shard_group() != nullptr),
      trace_(profile_plan_of(a, ctx.rank(), ctx.pp_rank(), ctx.tp_rank(), ctx.dp_rank())),
      timers_(static_cast<int>(a.logging.timing_log_level)),
      port_(ctx.transport(), position_of(layout_, ctx), [this] {
        if (wakeup_) wakeup_();
      }) {
  const tensor::default_device_scope on_device(device_);
  prepare_profile_folder(trace_.plan());
  timers_.trace_into(&trace_);
  port_.trace_into(&trace_);
  // FSDP shards gradients (and parameters) only where the optimizer is sharded: over one replica
  // there is nothing to shard.
  const bool fully_sharded = distributed_optimizer_ && sharding_.strategy >= config::dp_sharding::optim_grads;
  auto config = model_config_from_args(a, padded, ctx.tp_rank(), ctx.cp_rank(), ctx.ep_rank(), ctx.expert_tp_rank());
  // Megatron FSDP's meta-device initialization saves memory where parameters are sharded; with
  // whole parameters on every rank it draws the same whole model.
  config.init_model_with_meta_device =
      a.distributed.init_model_with_meta_device && fully_sharded && sharding_.shards_params();
  chunks_.reserve(layout_.virtual_size);
  if (trace_.plan().enabled && ctx.tensor_parallel().size() > 1)
    traced_tp_ = std::make_unique<traced_group>(ctx.tensor_parallel(), trace_);
  for (const auto& l : layout_.chunks)
    chunks_.emplace_back(config, traced_tp_ ? static_cast<model::group&>(*traced_tp_) : ctx.tensor_parallel(), l,
                         &ctx.context_parallel(), model::moe_groups{&ctx.expert_parallel_group(), ctx.sequence_shards(), ctx.expert_tensor_parallel_group(),
                                           ctx.global_batch_group()});
  for (auto& chunk : chunks_) chunk.set_amax_group(ctx.amax_reduction_group());
  std::int64_t rank_parameters = 0;
  for (auto& chunk : chunks_)
    for (const auto& p : chunk.parameters()) rank_parameters += static_cast<std::int64_t>(p.numel);
  auto sync_options = grad_sync_options_of(a, distributed_optimizer_, config.sequence_parallel, rank_parameters);
  sync_options.shard_grads = fully_sharded;
  sync_options.shard_params = fully_sharded && sharding_.shards_params();
  // FSDP reduce-scatters each backward's gradients into the shard (and ZeRO-3 gathers before
  // each compute) whether or not the user asked for overlap: Megatron FSDP's
  // --overlap-grad-reduce / --overlap-param-gather move the same collectives onto a side stream.
  if (fully_sharded) sync_options.overlap_grad_reduce = sync_options.overlap_param_gather = false;
  // The embedding and the loss in two chunks of this rank (rank 0 of ZB-V's V): a shared
  // embedding's two copies are summed here.
  const auto& held = layout_.chunks;
  const bool embedding_apart = std::any_of(held.begin(), held.end(), [](const auto& c) { return c.pre_process && !c.post_process; });
  const bool loss_apart = std::any_of(held.begin(), held.end(), [](const auto& c) { return c.post_process && !c.pre_process; });
  sync_options.local_tied_embedding = embedding_apart && loss_apart && config.shares_word_embedding();
  grad_sync_ = std::make_unique<grad_sync>(synced_chunks(chunks_), sync_options,
                                           ctx.data_parallel(), ctx.embedding(), timers_, activity_,
                                           ctx.optimizer_shard_group(), ctx.optimizer_instances(),
                                           ctx.expert_data_parallel(), ctx.expert_optimizer_shard_group());
  grad_sync_->trace_into(&trace_);
  // Before the main parameters: with sharded parameters they are the shard's.
  if (fully_sharded) fsdp_ = std::make_unique<fsdp_residency>(chunks_, *grad_sync_, sharding_);
  main_params_ = std::make_unique<training::main_params>(chunks_);
  main_grads_ = std::make_unique<training::main_grads>(chunks_, *grad_sync_);
  if (a.transformer_engine.fp8_param_gather) hold_fp8_weights();
  stats_place place{ctx.tp_rank(), ctx.ep_rank()};
  if (a.moe.num_experts.value_or(0) > 0) {
    stats_over_world_ = place.over_world = true;
    place.experts_apart = config::experts_have_own_groups(a);
    place.dp_rank = ctx.dp_rank(), place.cp_rank = ctx.cp_rank();
    place.expert_dp_rank = ctx.expert_dp_rank(), place.optimizer_instance = ctx.optimizer_instance();
  }
  optimizer_ = model::make_optimizer(optimizer_params(chunks_, *main_params_, *main_grads_, *grad_sync_, a, place),
                                     optimizer_options_from_args(a));
  if (auto options = grad_scaler_options_from_args(a)) scaler_.emplace(*options);
  // TE's FusedAdam holds fp16 master weights only for a 16-bit model (an fp32 one has none),
  // initialized from the model's weights; the CPU-offloaded optimizer updates fp32 ones
  // (HybridDeviceOptimizer's param_update_in_fp32).
  if (a.experimental.use_precision_aware_optimizer && a.experimental.main_params_dtype == "float16" &&
      !a.training.optimizer_cpu_offload && main_params_->separate()) {
    fp16_main_ = std::make_unique<training::fp16_main_params>();
    fp16_main_->store(optimizer_->params());
  }
}

void stage_engine::begin_schedule(bool forward_only, const batch_loader& loader, std::int64_t consumed,
                                  int num_microbatches, bool cyclic) {
  schedules::schedule_shape s = schedules::shape_from_args(args_);
  s.pipeline_model_parallel_size = layout_.pipeline_size;
  s.pipeline_rank = layout_.pipeline_rank;
  s.virtual_pipeline_model_parallel_size = layout_.virtual_size;
  s.num_microbatches = num_microbatches;  // this iteration's (a batch-size ramp changes it)
  s.forward_only = forward_only;
  if (const auto errors = schedules::validate(s); !errors.empty()) {
    std::string message = "the pipeline schedule cannot run:";
    for (const auto& e : errors) message += "\n  " + e;
    throw std::invalid_argument(message);
  }
  schedule_.emplace(schedules::make_schedule(s));
  port_.begin(forward_only);
  pending_.reset();
  forward_only_ = forward_only;
  // ZB-H1's rank 0 runs each weight pass right after its backward (its lag is the rank): nothing
  // to keep. ZB-V's and DualPipeV's weight passes may come later on every rank.
  const bool h1_rank_0 = s.kind == schedules::schedule_kind::zero_bubble_h1 && layout_.pipeline_rank == 0;
  defer_weight_grads_ = !forward_only && schedules::splits_backward(s) && !h1_rank_0;
  cyclic_ = cyclic;
  loader_ = &loader;
  consumed_ = consumed;
  num_microbatches_ = num_microbatches;
  batches_.clear();
  batch_loads_ = {};
  totals_ = {};
  microbatch_losses_.clear();
  moe_losses_.clear();
  timeline_.clear();
  wait_start_.reset();
  schedule_start_ = clock_type::now();
}

const batch_buffers& stage_engine::batch(int microbatch) {
  auto it = batches_.find(microbatch);
  if (it != batches_.end()) return it->second;
  const std::int64_t step = static_cast<std::int64_t>(layout_.micro_batch_size) * layout_.data_parallel_size;
  const auto start = clock_type::now();
  const auto& b = batches_.emplace(microbatch, loader_->load(consumed_ + microbatch * step, cyclic_)).first->second;
  const double seconds = seconds_between(start, clock_type::now());
  batch_loads_.total += seconds;
  batch_loads_.longest = std::max(batch_loads_.longest, seconds);
  return b;
}

void stage_engine::record(const action& a, clock_type::time_point start, bool waiting, clock_type::time_point end) {
  timeline_.push_back({a, seconds_between(schedule_start_, start), seconds_between(schedule_start_, end), waiting});
  const bool forward = a.kind == op::forward;
  if (trace_.active()) trace_compute(a, start, waiting, end);
  if (forward_only_) return;
  const auto timer = waiting ? (forward ? step_timer::forward_recv : step_timer::backward_recv)
                             : (forward ? step_timer::forward_compute : step_timer::backward_compute);
  timers_.add(timer, seconds_between(start, end));
}

// A compute action, or the wait for its input, as a span: "forward mb 3 chunk 1", "wait
// recv_backward mb 3 chunk 1", "eval forward mb 0 chunk 0".
void stage_engine::trace_compute(const action& a, clock_type::time_point start, bool waiting, clock_type::time_point end) {
  const bool forward = a.kind == op::forward;
  std::string name = forward_only_ ? "eval " : "";
  const bool weight = a.kind == op::backward_weight;
  name += waiting ? (forward ? "wait recv_forward" : "wait recv_backward")
                  : (forward ? "forward" : weight ? "weight gradients" : "backward");
  name += " mb " + std::to_string(a.microbatch) + " chunk " + std::to_string(a.chunk);
  trace_.span(std::move(name), forward_only_ ? "eval" : waiting ? "wait" : "compute", start, end,
              {{"microbatch", a.microbatch}, {"chunk", a.chunk},
               {"virtual_stage", config::virtual_stage_of(layout_.placement, layout_.pipeline_size,
                                                          layout_.pipeline_rank, a.chunk)}});
}

// Whether a compute action's input is here: the embedding's forward and the loss's backward need
// none; otherwise the port's received tensor, or false (and the wait begins) while it is not.
bool stage_engine::input_ready(const action& a, tensor::tensor*& input) {
  const auto& layout = chunks_[a.chunk].layout();
  input = nullptr;
  if (a.kind == op::forward ? layout.pre_process : layout.post_process) return true;
  input = port_.input(a);
  if (input) return true;
  if (!wait_start_) {
    wait_start_ = clock_type::now();
    activity_.set("awaiting " + port_.awaited(a));
  }
  return false;
}

// Runs one action; false when it must wait for a transfer (the action stays pending).
bool stage_engine::execute(const action& a) {
  const auto& layout = chunks_[a.chunk].layout();
  const auto activation_shape = [&] {
    return tensor::shape_type{static_cast<std::int64_t>(chunks_[a.chunk].activation_numel(layout_.micro_batch_size))};
  };
  switch (a.kind) {
    case op::recv_forward:
    case op::recv_backward: port_.post_recv(a, activation_shape(), chunks_[a.chunk].activation_dtype()); return true;
    case op::send_forward:
    case op::send_backward: port_.post_send(a); return true;
    case op::backward_weight: run_weight_pass(a); return true;
    case op::forward:
    case op::backward: break;
  }
  grad_sync_->wait_param_sync();  // --overlap-param-gather: the updated parameters must have arrived
  tensor::tensor* input = nullptr;
  if (!input_ready(a, input)) return false;
  const auto start = clock_type::now();
  if (wait_start_) {
    record(a, *wait_start_, /*waiting=*/true, start);
    wait_start_.reset();
  }
  const bool forward = a.kind == op::forward;
  activity_.set(std::string(forward ? "forward" : "backward") + " mb " + std::to_string(a.microbatch) + " chunk " +
                std::to_string(a.chunk));
  tensor::tensor output;
  if (forward ? !layout.post_process : !layout.pre_process)
    output = tensor::tensor(activation_shape(), chunks_[a.chunk].activation_dtype(), tensor::memory_kind::activations);
  if (fsdp_) fsdp_->before_compute(a.chunk, forward);
  if (forward)
    run_forward(a, input, output);
  else
    run_backward(a, input, output);
  if (fsdp_) forward ? fsdp_->after_forward(a.chunk) : fsdp_->after_backward(a.chunk);
  if (output.defined()) port_.keep_output(a, std::move(output));
  if (input) port_.release_input(a);
  record(a, start, /*waiting=*/false, clock_type::now());
  return true;
}

void stage_engine::run_forward(const action& a, const tensor::tensor* input, tensor::tensor& output) {
  auto& chunk = chunks_[a.chunk];
  const auto& b = batch(a.microbatch);
  float scale = 0.0f;
  if (chunk.layout().post_process && !forward_only_) {
    // This rank's tokens (its positions under context parallelism).
    const double count = chunk.loss_tokens(b.view());
    // Megatron divides each micro-batch's loss by its token count and by the micro-batch count;
    // with --calculate-per-token-loss it keeps the sum and divides by the global batch's tokens
    // at finalize.
    if (args_.training.calculate_per_token_loss)
      scale = 1.0f;
    else
      scale = count > 0 ? static_cast<float>(1.0 / (count * num_microbatches_)) : 0.0f;
    if (scaler_) scale *= scaler_->scale();  // Megatron's grad_scale_func on the output
  }
  if (chunk.config().moe.enabled() && !forward_only_) {
    // Megatron's forward_step sets MoEAuxLossAutoScaler's scale on every stage: the loss scale,
    // divided by the micro-batch count unless the loss is per token.
    double aux = args_.training.calculate_per_token_loss ? 1.0 : 1.0 / num_microbatches_;
    if (scaler_) aux *= scaler_->scale();
    chunk.set_moe_aux_loss_scale(aux);
  }
  if (chunk.config().mtp_num_layers > 0 && !forward_only_) {
    // Megatron's forward_step sets MTPLossAutoScaler's scale the same way.
    double mtp = args_.training.calculate_per_token_loss ? 1.0 : 1.0 / num_microbatches_;
    if (scaler_) mtp *= scaler_->scale();
    chunk.set_mtp_loss_scale(mtp, args_.training.calculate_per_token_loss);
  }
  // The same dropout masks as one process: the micro-batch's index in the global sample order.
  const auto step = static_cast<std::uint64_t>(consumed_ / layout_.micro_batch_size +
                                               a.microbatch * layout_.data_parallel_size + layout_.data_parallel_rank);
  const auto r = chunk.forward(a.microbatch, b.view(), input ? input->view() : tensor::const_tensor_view{},
                               output.view(), !forward_only_, !forward_only_, scale, step);
  if (chunk.config().moe.enabled() && !forward_only_) {
    moe_losses_.resize(model::moe_aux_loss_kinds * std::size_t(chunk.config().num_layers + chunk.config().mtp_num_layers), 0.0);
    chunk.add_moe_aux_losses(moe_losses_);
    for (auto* router : chunk.moe_routers()) router->count_routed_tokens();
  }
  if (chunk.layout().post_process) {
    totals_.loss_sum += r.loss_sum;
    totals_.num_tokens += r.num_tokens;
    microbatch_losses_.push_back(r.loss_sum);
  }
}

std::vector<double> stage_engine::moe_aux_losses() const {
  std::vector<double> out = moe_losses_;
  for (auto& v : out) v /= num_microbatches_;
  return out;
}

std::vector<double> stage_engine::mtp_losses() {
  std::vector<double> out;
  for (auto& chunk : chunks_) {
    if (chunk.mtp_depths() == 0) continue;
    const auto depth = chunk.take_mtp_losses();
    out.resize(depth.size(), 0.0);
    for (std::size_t k = 0; k < depth.size(); ++k) out[k] += depth[k] / num_microbatches_;
  }
  return out;
}

void stage_engine::run_backward(const action& a, const tensor::tensor* input, tensor::tensor& grad_input) {
  // The chunk's last backward of the iteration reduces each bucket as soon as it is complete
  // (with deferred weight gradients: its weight pass, below).
  std::function<void(int)> progress;
  if (grad_sync_->overlapped() && a.microbatch == num_microbatches_ - 1 && !defer_weight_grads_)
    progress = [this, c = a.chunk](int event) { grad_sync_->backward_progress(c, event); };
  auto& weight_grads = chunks_[a.chunk].store().weight_grads();
  if (defer_weight_grads_) weight_grads.begin_collecting(a.microbatch);
  chunks_[a.chunk].backward(a.microbatch, input ? input->view() : tensor::const_tensor_view{},
                            grad_input.view(), progress);
  weight_grads.stop_collecting();
}

// ZB-H1's W: the weight gradients the backward of (microbatch, chunk) left, in the order the
// layers handed them over. Without deferral they were made in the backward: nothing to do.
void stage_engine::run_weight_pass(const action& a) {
  if (!defer_weight_grads_) return;
  const auto start = clock_type::now();
  activity_.set("weight gradients mb " + std::to_string(a.microbatch) + " chunk " + std::to_string(a.chunk));
  auto& chunk = chunks_[a.chunk];
  chunk.store().weight_grads().run(a.microbatch);
  if (grad_sync_->overlapped() && a.microbatch == num_microbatches_ - 1) {
    // Every part's weight gradients are complete now: the buckets go in the backward's order.
    if (chunk.layout().post_process) grad_sync_->backward_progress(a.chunk, chunk.backward_done_final_norm());
    for (int layer = chunk.backward_done_final_norm() - 1; layer >= 0; --layer) grad_sync_->backward_progress(a.chunk, layer);
    if (chunk.layout().pre_process) grad_sync_->backward_progress(a.chunk, model::gpt_chunk::backward_done_embedding);
  }
  record(a, start, /*waiting=*/false, clock_type::now());
}

bool stage_engine::pump() {
  if (!schedule_) return true;
  const tensor::default_device_scope on_device(device_);
  while (true) {
    if (!pending_) pending_ = schedule_->next();
    if (!pending_) break;
    if (!execute(*pending_)) return false;
    pending_.reset();
  }
  for (auto& chunk : chunks_)
    if (chunk.store().weight_grads().pending())
      throw std::logic_error("stage_engine: the schedule ended with weight gradients not run (a W action is missing)");
  // Flush: every send must have left before the iteration ends.
  if (const auto send = port_.unfinished_send()) {
    activity_.set("flushing " + *send);
    return false;
  }
  schedule_.reset();
  batches_.clear();
  if (fsdp_) fsdp_->release_all();
  {
    std::lock_guard lock(timeline_mutex_);
    last_timeline_ = std::move(timeline_);
  }
  activity_.set("idle");
  timeline_.clear();
  return true;
}

int stage_engine::num_microbatches_in_flight() const {
  int n = 0;
  for (const auto& c : chunks_) n += static_cast<int>(c.slots_in_flight());
  return n;
}

std::pair<std::string, clock_type::time_point> stage_engine::activity() const {
  return activity_.describe(ctx_.watched());
}

std::vector<timeline_entry> stage_engine::last_timeline() const {
  std::lock_guard lock(timeline_mutex_);
  return last_timeline_;
}

std::int64_t stage_engine::bytes_sent() const {
  const auto* t = ctx_.transport();
  return t ? t->traffic().sent.load(std::memory_order_relaxed) : 0;
}

std::int64_t stage_engine::bytes_received() const {
  const auto* t = ctx_.transport();
  return t ? t->traffic().received.load(std::memory_order_relaxed) : 0;
}

}  // namespace mactor::training

// The stage engine: its chunks, the schedule's compute actions, and the calls into the pipeline
// port, grad sync and the optimizer.
#include "training/stage_engine.hpp"

#include <stdexcept>
#include <string>

#include "model/grad_clip.hpp"
#include "training/chunk_params.hpp"
#include "training/model_spec.hpp"
#include "training/qk_norm_check.hpp"
#include "training/weight_hash_check.hpp"

namespace mactor::training {
namespace {

using clock_type = std::chrono::steady_clock;
using schedules::action;
using schedules::op;

double seconds_between(clock_type::time_point from, clock_type::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

pipeline_position position_of(const stage_layout& l, const parallel_context& ctx) {
  pipeline_position p{l.pipeline_size, l.pipeline_rank, l.virtual_size, {}};
  for (int s = 0; s < l.pipeline_size; ++s) p.stage_ranks.push_back(ctx.pipeline_rank_of(s));
  return p;
}

}  // namespace

stage_engine::stage_engine(const config::megatron_args& a, parallel_context& ctx, std::int64_t padded)
    : args_(a), ctx_(ctx), layout_(stage_layout_of(a, ctx)),
      distributed_optimizer_(a.distributed.use_distributed_optimizer && ctx.optimizer_shard_group() != nullptr),
      trace_(profile_plan_of(a, ctx.rank(), ctx.pp_rank(), ctx.tp_rank(), ctx.dp_rank())),
      timers_(static_cast<int>(a.logging.timing_log_level)),
      port_(ctx.transport(), position_of(layout_, ctx), [this] {
        if (wakeup_) wakeup_();
      }) {
  prepare_profile_folder(trace_.plan());
  timers_.trace_into(&trace_);
  port_.trace_into(&trace_);
  const auto config = model_config_from_args(a, padded, ctx.tp_rank(), ctx.cp_rank(), ctx.ep_rank());
  chunks_.reserve(layout_.virtual_size);
  if (trace_.plan().enabled && ctx.tensor_parallel().size() > 1)
    traced_tp_ = std::make_unique<traced_group>(ctx.tensor_parallel(), trace_);
  for (const auto& l : layout_.chunks)
    chunks_.emplace_back(config, traced_tp_ ? static_cast<model::group&>(*traced_tp_) : ctx.tensor_parallel(), l,
                         &ctx.context_parallel(), &ctx.expert_parallel_group());
  std::int64_t rank_parameters = 0;
  for (auto& chunk : chunks_)
    for (const auto& p : chunk.parameters()) rank_parameters += static_cast<std::int64_t>(p.numel);
  grad_sync_ = std::make_unique<grad_sync>(synced_chunks(chunks_),
                                           grad_sync_options_of(a, distributed_optimizer_, config.sequence_parallel, rank_parameters),
                                           ctx.data_parallel(), ctx.embedding(), timers_, activity_,
                                           ctx.optimizer_shard_group(), ctx.optimizer_instances(),
                                           ctx.expert_data_parallel());
  grad_sync_->trace_into(&trace_);
  main_params_ = std::make_unique<training::main_params>(chunks_);
  main_grads_ = std::make_unique<training::main_grads>(chunks_, *grad_sync_);
  if (a.transformer_engine.fp8_param_gather) hold_fp8_weights();
  optimizer_ = model::make_optimizer(optimizer_params(chunks_, *main_params_, *main_grads_, *grad_sync_, a, ctx.tp_rank(),
                                                      ctx.ep_rank()),
                                     optimizer_options_from_args(a));
  if (auto options = grad_scaler_options_from_args(a)) scaler_.emplace(*options);
  // TE's FusedAdam holds fp16 master weights only for a 16-bit model (an fp32 one has none),
  // initialized from the model's weights.
  if (a.experimental.use_precision_aware_optimizer && a.experimental.main_params_dtype == "float16" &&
      main_params_->separate()) {
    fp16_main_ = std::make_unique<training::fp16_main_params>();
    fp16_main_->store(optimizer_->params());
  }
}

// --fp8-param-gather: the fp8-GEMM weights become fp8 (cast from the initial main parameters),
// and the parameter all-gather moves their bytes.
void stage_engine::hold_fp8_weights() {
  fp8_params_ = std::make_unique<training::fp8_params>(chunks_, *main_params_);
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    std::vector<fp8_weight_place> places;
    for (const auto& w : fp8_params_->weights(c)) places.push_back({w.offset, w.numel, w.byte_offset});
    grad_sync_->gather_fp8(c, fp8_params_->bytes(c), std::move(places));
  }
}

void stage_engine::model_params_from_main() {
  main_params_->copy_all_to_model();
  if (fp8_params_) fp8_params_->cast_all();
  if (fp16_main_) fp16_main_->store(optimizer_->params());  // FusedAdam's load_state_dict
}

void stage_engine::main_params_from_model() {
  main_params_->copy_all_from_model();
  if (fp8_params_) fp8_params_->dequantize_into_main();
  if (fp16_main_) fp16_main_->store(optimizer_->params());
}

void stage_engine::begin_schedule(bool forward_only, const batch_loader& loader, std::int64_t consumed,
                                  int num_microbatches, bool cyclic) {
  schedules::schedule_shape s;
  s.pipeline_model_parallel_size = layout_.pipeline_size;
  s.pipeline_rank = layout_.pipeline_rank;
  s.virtual_pipeline_model_parallel_size = layout_.virtual_size;
  s.num_microbatches = num_microbatches;
  s.microbatch_group_size_per_vp_stage = static_cast<int>(args_.distributed.microbatch_group_size_per_vp_stage.value_or(0));
  s.overlap_p2p_comm = args_.distributed.overlap_p2p_comm;
  s.overlap_p2p_comm_warmup_flush = args_.distributed.overlap_p2p_comm_warmup_flush;
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
  name += waiting ? (forward ? "wait recv_forward" : "wait recv_backward") : (forward ? "forward" : "backward");
  name += " mb " + std::to_string(a.microbatch) + " chunk " + std::to_string(a.chunk);
  trace_.span(std::move(name), forward_only_ ? "eval" : waiting ? "wait" : "compute", start, end,
              {{"microbatch", a.microbatch}, {"chunk", a.chunk},
               {"virtual_stage", a.chunk * layout_.pipeline_size + layout_.pipeline_rank}});
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
  if (forward)
    run_forward(a, input, output);
  else
    run_backward(a, input, output);
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
  // The same dropout masks as one process: the micro-batch's index in the global sample order.
  const auto step = static_cast<std::uint64_t>(consumed_ / layout_.micro_batch_size +
                                               a.microbatch * layout_.data_parallel_size + layout_.data_parallel_rank);
  const auto r = chunk.forward(a.microbatch, b.view(), input ? input->view() : tensor::const_tensor_view{},
                               output.view(), !forward_only_, !forward_only_, scale, step);
  if (chunk.config().moe.enabled() && !forward_only_) {
    moe_losses_.resize(3 * std::size_t(chunk.config().num_layers), 0.0);
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

void stage_engine::run_backward(const action& a, const tensor::tensor* input, tensor::tensor& grad_input) {
  // The chunk's last backward of the iteration reduces each bucket as soon as it is complete.
  std::function<void(int)> progress;
  if (grad_sync_->overlapped() && a.microbatch == num_microbatches_ - 1)
    progress = [this, c = a.chunk](int event) { grad_sync_->backward_progress(c, event); };
  chunks_[a.chunk].backward(a.microbatch, input ? input->view() : tensor::const_tensor_view{},
                            grad_input.view(), progress);
}

bool stage_engine::pump() {
  if (!schedule_) return true;
  while (true) {
    if (!pending_) pending_ = schedule_->next();
    if (!pending_) break;
    if (!execute(*pending_)) return false;
    pending_.reset();
  }
  // Flush: every send must have left before the iteration ends.
  if (const auto send = port_.unfinished_send()) {
    activity_.set("flushing " + *send);
    return false;
  }
  schedule_.reset();
  batches_.clear();
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

void stage_engine::zero_grad() {
  for (auto& c : chunks_) c.zero_grad();
}

void stage_engine::finalize_grads() {
  const trace_recorder::scope traced(trace_, "finalize model grads", "grad_sync");
  grad_sync_->record_local_grad_norms();  // --check-for-large-grads: before any reduction
  // Sequence parallelism: norm weights and row-parallel biases saw only this rank's positions;
  // their gradients are summed over the tensor-parallel group (Megatron's
  // _allreduce_layernorm_grads): before the data-parallel sync, or after the overlapped one
  // (both are sums: the same).
  if (!grad_sync_->overlapped())
    for (auto& c : chunks_) c.all_reduce_sequence_parallel_grads();
  grad_sync_->finish_grad_sync();
  if (grad_sync_->overlapped())
    for (auto& c : chunks_) c.all_reduce_sequence_parallel_grads();
  update_router_expert_biases();
}

// Megatron's _update_router_expert_bias: every router's tokens per expert of this global batch,
// summed over the data-parallel replicas (MoE runs with tp = cp = 1 here), move its bias.
void stage_engine::update_router_expert_biases() {
  std::vector<model::moe_router*> routers;
  for (auto& c : chunks_)
    for (auto* r : c.moe_routers())
      if (!r->expert_bias().empty()) routers.push_back(r);
  if (routers.empty()) return;
  const std::size_t experts = routers.front()->routed_tokens().size();
  std::vector<double> counts;
  counts.reserve(routers.size() * experts);
  for (auto* r : routers) counts.insert(counts.end(), r->routed_tokens().begin(), r->routed_tokens().end());
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
// distributed optimizer's shards (with expert parallelism, the data-parallel group covers every
// dense and every expert slice once), or the expert-parallel ranks' own experts.
void stage_engine::reduce_stats(std::span<double> values) {
  if (auto* mp = ctx_.model_parallel()) mp->all_reduce(values);
  if (distributed_optimizer_)
    ctx_.optimizer_shard_group()->all_reduce(values);
  else if (auto* ep = ctx_.expert_parallel())
    ep->all_reduce(values);
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
    for (auto& c : chunks_)
      for (const auto& p : c.parameters())
        if (p.expert == experts) hashes.push_back(fnv1a_hash(p.value)), names.push_back(p.name);
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
        main_params_->copy_to_model(c, 0, static_cast<std::size_t>(chunks_[c].store().value_tensor().numel()));
    }
    if (fp8_params_) cast_fp8_weights();
    // The model took the fp32 update; the master keeps its fp16 rounding.
    if (fp16_main_) fp16_main_->store(optimizer_->params());
  }
  {
    // Megatron's distributed optimizer times its all-gather even over one replica (with
    // --overlap-param-gather, the posting only, as Megatron's does).
    std::optional<step_timers::scope> gather_timer;
    if (args_.distributed.use_distributed_optimizer) gather_timer.emplace(timers_, step_timer::params_all_gather);
    grad_sync_->start_param_sync();
  }
  optimizer_state_bytes_ = std::int64_t(optimizer_->state_bytes());
  activity_.set("idle");
  return result;
}

// TE's cast_master_weights_to_fp8: this rank's shard of each chunk (all of it without sharding).
void stage_engine::cast_fp8_weights() {
  std::vector<training::fp8_params::range> ranges;
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    const auto* shard = grad_sync_->shard_of(c);
    // fp8 runs without MoE experts: a shard is one range of the chunk.
    ranges.push_back(shard ? training::fp8_params::range{shard->ranges.front().begin, shard->ranges.front().end}
                           : training::fp8_params::range{0, static_cast<std::size_t>(chunks_[c].store().value_tensor().numel())});
  }
  fp8_params_->cast(ranges, grad_sync_->shard_group());
}

double stage_engine::params_norm() {
  sync_params();
  const trace_recorder::scope traced(trace_, "params norm", "optimizer");
  return model::params_norm(optimizer_->params(), [this](std::span<double> v) { reduce_stats(v); });
}

}  // namespace mactor::training

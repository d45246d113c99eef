// The stage engine: chunks, the asynchronous schedule port, gradient finalization, optimizer.
#include "training/stage_engine.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <thread>

#include "tensor/host_buffer.hpp"
#include "comm/watched_communicator.hpp"
#include "model/grad_clip.hpp"
#include "training/model_spec.hpp"

namespace mactor::training {
namespace {

using clock_type = std::chrono::steady_clock;
using schedules::action;
using schedules::op;

const char* op_name(op kind) {
  switch (kind) {
    case op::forward: return "forward";
    case op::backward: return "backward";
    case op::recv_forward: return "recv_forward";
    case op::send_forward: return "send_forward";
    case op::recv_backward: return "recv_backward";
    case op::send_backward: return "send_backward";
  }
  return "?";
}

}  // namespace

std::vector<model::chunk_layout> chunk_layouts(int num_layers, int pp, int vp, int pp_rank) {
  const int stages = pp * vp;
  if (num_layers % stages != 0)
    throw std::invalid_argument("--num-layers " + std::to_string(num_layers) + " does not divide into " +
                                std::to_string(stages) + " (virtual) pipeline stages");
  const int per_stage = num_layers / stages;
  std::vector<model::chunk_layout> out;
  for (int c = 0; c < vp; ++c) {
    const int v = c * pp + pp_rank;
    out.push_back({v * per_stage, (v + 1) * per_stage, v == 0, v == stages - 1});
  }
  return out;
}

// One posted transfer; the completion writes status, then sets done.
struct stage_engine::transfer {
  tensor::host_vector<float> buffer;
  comm::status status;
  std::atomic<bool> done{false};
  int peer = -1;
  action what;
};

// The distributed optimizer's view of one chunk: this rank's slice of the chunk's flat buffers.
struct stage_engine::chunk_shard {
  std::size_t numel = 0, padded = 0, begin = 0, end = 0;  // [begin, end) of the padded buffer
  tensor::host_vector<float> grads;                          // reduce-scattered grads of the slice
  tensor::host_vector<float> scratch;                        // padded copy for the collectives
};

stage_engine::stage_engine(const config::megatron_args& a, parallel_context& ctx, std::int64_t padded)
    : args_(a), ctx_(ctx), pp_(ctx.groups().pp()),
      vp_(static_cast<int>(a.derived.virtual_pipeline_model_parallel_size.value_or(1))),
      pp_rank_(ctx.pp_rank()), dp_(ctx.groups().dp()), dp_rank_(ctx.dp_rank()),
      mbs_(static_cast<int>(*a.training.micro_batch_size)),
      distributed_optimizer_(a.distributed.use_distributed_optimizer && ctx.groups().dp() > 1),
      timers_(static_cast<int>(a.logging.timing_log_level)) {
  const auto config = model_config_from_args(a, padded, ctx.tp_rank());
  chunks_.reserve(vp_);
  for (const auto& layout : chunk_layouts(config.num_layers, pp_, vp_, pp_rank_))
    chunks_.emplace_back(config, ctx.tensor_parallel(), layout);

  const bool decoupled = a.learning_rate.decoupled_lr.has_value();
  const bool tp_first = ctx.tp_rank() == 0;
  auto view = [&](const model::parameter<float>& p, const model::gpt_chunk<float>& chunk, float* value,
                  float* grad, std::size_t numel) {
    model::optim_param o;
    o.name = p.name;
    o.value = value;
    o.grad = grad;
    o.numel = numel;
    o.no_weight_decay = p.no_weight_decay;
    // Megatron applies --decoupled-lr to the embedding and the output layer.
    o.decoupled_lr = decoupled && (p.name.rfind("embedding.", 0) == 0 || p.name.rfind("output_layer.", 0) == 0);
    // Counted once: tensor-parallel duplicates on tp rank 0 only, the tied embedding on the
    // first stage only (Megatron's param_is_not_tensor_parallel_duplicate / param_is_not_shared).
    const bool duplicate = p.split == model::tp_split::replicated && !tp_first;
    const bool shared_copy = !chunk.layout().pre_process && p.name == "embedding.word_embeddings.weight";
    o.in_grad_stats = !duplicate && !shared_copy;
    return o;
  };
  std::vector<model::optim_param> params;
  shards_.resize(chunks_.size());
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    auto& chunk = chunks_[c];
    if (!distributed_optimizer_) {
      for (auto& p : chunk.parameters()) params.push_back(view(p, chunk, p.value, p.grad, p.numel));
      continue;
    }
    // Megatron's distributed optimizer: the flat buffer, padded to a multiple of dp, split evenly.
    auto& s = shards_[c];
    s.numel = chunk.store().values().size();
    s.padded = (s.numel + dp_ - 1) / dp_ * dp_;
    s.begin = s.padded / dp_ * dp_rank_;
    s.end = s.begin + s.padded / dp_;
    s.grads.assign(s.end - s.begin, 0.0f);
    s.scratch.assign(s.padded, 0.0f);
    for (auto& p : chunk.parameters()) {
      const std::size_t lo = std::max(p.offset, s.begin), hi = std::min(p.offset + p.numel, s.end);
      if (lo >= hi) continue;
      params.push_back(view(p, chunk, p.value + (lo - p.offset), s.grads.data() + (lo - s.begin), hi - lo));
    }
  }
  optimizer_ = model::make_optimizer(std::move(params), optimizer_options_from_args(a));
  if (a.distributed.overlap_grad_reduce && dp_ > 1) {
    // Megatron's default bucket: max(40M, 1M x dp) elements (the distributed optimizer here
    // shards whole chunks, so a chunk is its one bucket).
    const std::int64_t size = a.distributed.ddp_bucket_size.value_or(std::max<std::int64_t>(40000000, 1000000LL * dp_));
    // With the distributed optimizer and sequence parallelism, the tensor-parallel sum must
    // precede the reduce-scatter, on the stage's thread: those gradients are reduced at finalize.
    if (!(distributed_optimizer_ && chunks_.front().config().sequence_parallel))
      build_grad_buckets(distributed_optimizer_ ? std::numeric_limits<std::int64_t>::max() : size);
    comm_ = std::make_unique<comm_worker>();
    overlap_param_gather_ = distributed_optimizer_ && a.distributed.overlap_param_gather;
  }
}

namespace {

// The backward event after which a parameter's gradient is complete (see gpt_chunk::backward).
int ready_event(const model::gpt_chunk<float>& chunk, const std::string& name) {
  const std::string layers = "decoder.layers.";
  if (name.rfind(layers, 0) == 0) return std::stoi(name.substr(layers.size())) - chunk.layout().layer_begin;
  if (name.rfind("embedding.", 0) == 0 && chunk.layout().pre_process) return model::gpt_chunk<float>::backward_done_embedding;
  return chunk.backward_done_final_norm();  // final norm, output layer, the tied embedding's copy
}

}  // namespace

void stage_engine::build_grad_buckets(std::int64_t bucket_size) {
  const bool tied = !chunks_.front().config().untie_embeddings_and_output_weights && ctx_.embedding();
  // The last chunk's last backward comes first (the interleaved schedule's cooldown runs the
  // chunks in reverse): its buckets come first.
  for (std::size_t c = chunks_.size(); c-- > 0;) {
    auto& chunk = chunks_[c];
    std::vector<const model::parameter<float>*> params;
    for (const auto& p : chunk.parameters()) params.push_back(&p);
    // Backward finishes the parameters roughly in reverse order of registration: bucket from the end.
    std::sort(params.begin(), params.end(), [](auto* x, auto* y) { return x->offset > y->offset; });
    grad_bucket b;
    b.chunk = c;
    b.end = chunk.store().grads().size();
    b.begin = b.end;
    b.ready_event = std::numeric_limits<int>::max();
    for (std::size_t i = 0; i < params.size(); ++i) {
      const auto& p = *params[i];
      if (p.offset + p.numel != b.begin) throw std::logic_error("gradient buffer of chunk " + std::to_string(c) + " is not contiguous");
      b.begin = p.offset;
      b.ready_event = std::min(b.ready_event, ready_event(chunk, p.name));
      if (tied && p.name == "embedding.word_embeddings.weight") b.tied_embedding = chunk.word_embeddings_id();
      if (static_cast<std::int64_t>(b.end - b.begin) >= bucket_size || i + 1 == params.size()) {
        buckets_.push_back(b);
        b.end = b.begin;
        b.ready_event = std::numeric_limits<int>::max();
        b.tied_embedding = -1;
      }
    }
  }
}

// One bucket's share of finalize_grads, on the comm worker: the tied embedding's cross-stage sum,
// then the data-parallel mean (all-reduce, or reduce-scatter into the distributed optimizer's shard).
void stage_engine::reduce_bucket(const grad_bucket& b) {
  auto& chunk = chunks_[b.chunk];
  if (b.tied_embedding >= 0) {
    auto& p = chunk.store()[b.tied_embedding];
    ctx_.embedding()->all_reduce(std::span<float>(p.grad, p.numel));
  }
  reduce_over_replicas(b.chunk, b.begin, b.end);
}

// Megatron's DDP: scale by 1/dp, then sum over the replicas, so every replica holds the mean of
// grads [begin, end) of chunk c (all of it with the distributed optimizer, whose reduce-scatter
// leaves this rank's shard of the sum in shards_[c].grads).
void stage_engine::reduce_over_replicas(std::size_t c, std::size_t begin, std::size_t end) {
  auto grads = chunks_[c].store().grads().subspan(begin, end - begin);
  const float scale = 1.0f / static_cast<float>(dp_);
  for (float& g : grads) g *= scale;
  if (!distributed_optimizer_) {
    ctx_.data_parallel()->all_reduce(grads);
    return;
  }
  auto& s = shards_[c];
  if (begin != 0 || end != s.numel) throw std::logic_error("the distributed optimizer reduces whole chunks");
  std::copy(grads.begin(), grads.end(), s.scratch.begin());
  std::fill(s.scratch.begin() + static_cast<std::ptrdiff_t>(s.numel), s.scratch.end(), 0.0f);
  ctx_.data_parallel()->reduce_scatter(std::span<const float>(s.scratch), std::span<float>(s.grads));
}

// Posts, in bucket order (the same on every replica), each bucket of `chunk` whose gradients are
// complete once `fired_event` has fired; INT_MIN posts whatever is left.
void stage_engine::launch_ready_buckets(int chunk, int fired_event) {
  while (next_bucket_ < buckets_.size()) {
    const auto& b = buckets_[next_bucket_];
    if (fired_event != std::numeric_limits<int>::min() && (static_cast<int>(b.chunk) != chunk || b.ready_event < fired_event))
      return;
    comm_->post([this, &b] { reduce_bucket(b); });
    ++next_bucket_;
  }
}

stage_engine::~stage_engine() {
  // Transfers still in flight (a failed schedule) must not complete into freed buffers: the
  // transport is closed by its owner after this; wait briefly for what is outstanding.
  const auto deadline = clock_type::now() + std::chrono::seconds(2);
  auto outstanding = [&] {
    for (auto& [k, t] : recvs_)
      if (!t->done.load()) return true;
    for (auto& t : sends_)
      if (!t->done.load()) return true;
    return false;
  };
  while (outstanding() && clock_type::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

bool stage_engine::is_first_stage() const { return pp_rank_ == 0; }
bool stage_engine::is_last_stage() const { return pp_rank_ == pp_ - 1; }

int stage_engine::num_microbatches_in_flight() const {
  int n = 0;
  for (const auto& c : chunks_) n += static_cast<int>(c.slots_in_flight());
  return n;
}

std::uint64_t stage_engine::tag(bool gradient, int virtual_stage, int microbatch) const {
  return (std::uint64_t(gradient) << 38) | (std::uint64_t(forward_only_) << 37) |
         (std::uint64_t(virtual_stage) << 24) | std::uint64_t(microbatch & 0xFFFFFF);
}

std::int64_t stage_engine::bytes_sent() const {
  const auto* t = ctx_.transport();
  return t ? t->traffic().sent.load(std::memory_order_relaxed) : 0;
}

std::int64_t stage_engine::bytes_received() const {
  const auto* t = ctx_.transport();
  return t ? t->traffic().received.load(std::memory_order_relaxed) : 0;
}

void stage_engine::wait_background(const std::string& what) {
  {
    std::lock_guard lock(activity_mutex_);
    activity_ = "awaiting " + what;
    activity_since_ = clock_type::now();
    background_wait_ = what;
  }
  struct done {
    stage_engine& e;
    ~done() {
      std::lock_guard lock(e.activity_mutex_);
      e.background_wait_.clear();
    }
  } reset{*this};
  comm_->wait();
}

void stage_engine::set_activity(std::string what) {
  std::lock_guard lock(activity_mutex_);
  activity_ = std::move(what);
  activity_since_ = clock_type::now();
}

std::pair<std::string, clock_type::time_point> stage_engine::activity() const {
  std::pair<std::string, clock_type::time_point> now;
  std::string background_wait;
  {
    std::lock_guard lock(activity_mutex_);
    now = {activity_, activity_since_};
    background_wait = background_wait_;
  }
  // Inside a collective, the collective is what this stage waits for: on the training thread
  // it is the activity itself; on the background thread, when the training thread waits for it.
  for (const auto* w : ctx_.watched()) {
    auto call = w->current();
    if (!call) continue;
    if (!call->background) return {"awaiting " + call->what, call->since};
    if (!background_wait.empty()) return {"awaiting " + call->what + " (" + background_wait + ")", now.second};
  }
  return now;
}

std::vector<timeline_entry> stage_engine::last_timeline() const {
  std::lock_guard lock(activity_mutex_);
  return last_timeline_;
}

void stage_engine::begin_schedule(bool forward_only, const batch_loader& loader, std::int64_t consumed,
                                  int num_microbatches, bool cyclic) {
  schedules::schedule_shape s;
  s.pipeline_model_parallel_size = pp_;
  s.pipeline_rank = pp_rank_;
  s.virtual_pipeline_model_parallel_size = vp_;
  s.num_microbatches = num_microbatches;
  s.microbatch_group_size_per_vp_stage = static_cast<int>(args_.distributed.microbatch_group_size_per_vp_stage.value_or(0));
  s.overlap_p2p_comm = args_.distributed.overlap_p2p_comm;
  s.forward_only = forward_only;
  if (const auto errors = schedules::validate(s); !errors.empty()) {
    std::string message = "the pipeline schedule cannot run:";
    for (const auto& e : errors) message += "\n  " + e;
    throw std::invalid_argument(message);
  }
  schedule_.emplace(schedules::make_schedule(s));
  pending_.reset();
  forward_only_ = forward_only;
  cyclic_ = cyclic;
  loader_ = &loader;
  consumed_ = consumed;
  num_microbatches_ = num_microbatches;
  batches_.clear();
  totals_ = {};
  timeline_.clear();
  wait_start_.reset();
  schedule_start_ = clock_type::now();
}

const batch_buffers& stage_engine::batch(int microbatch) {
  auto it = batches_.find(microbatch);
  if (it != batches_.end()) return it->second;
  const std::int64_t step = static_cast<std::int64_t>(mbs_) * dp_;
  return batches_.emplace(microbatch, loader_->load(consumed_ + microbatch * step, cyclic_)).first->second;
}

void stage_engine::check(const transfer& t) const {
  if (!t.status.ok)
    throw comm::comm_error(t.peer, "pipeline " + std::string(op_name(t.what.kind)) + " of micro-batch " +
                                       std::to_string(t.what.microbatch) + " chunk " + std::to_string(t.what.chunk) +
                                       " with rank " + std::to_string(t.peer) + " failed: " + t.status.message);
}

// Records the outcome in the transfer, then wakes the driver (runs on the transport's thread).
comm::completion stage_engine::completion_of(transfer* t) {
  return [this, t](const comm::status& s) {
    t->status = s;
    t->done.store(true, std::memory_order_release);
    if (wakeup_) wakeup_();
  };
}

void stage_engine::post_recv(const action& a, bool gradient) {
  auto t = std::make_unique<transfer>();
  t->what = a;
  const int v = a.chunk * pp_ + pp_rank_;
  // Activations come from the previous virtual stage; gradients from the next one.
  t->peer = ctx_.pipeline_rank_of(gradient ? (pp_rank_ + 1) % pp_ : (pp_rank_ + pp_ - 1) % pp_);
  t->buffer.resize(chunks_[a.chunk].activation_numel(mbs_));
  transfer* raw = t.get();
  recvs_[{gradient, a.microbatch, a.chunk}] = std::move(t);
  ctx_.transport()->recv(raw->peer, tag(gradient, v, a.microbatch), raw->buffer.data(),
                         raw->buffer.size() * sizeof(float), completion_of(raw));
}

void stage_engine::post_send(const action& a, bool gradient) {
  auto it = outputs_.find({gradient, a.microbatch, a.chunk});
  if (it == outputs_.end())
    throw std::logic_error(std::string("schedule sends ") + op_name(a.kind) + " of micro-batch " +
                           std::to_string(a.microbatch) + " before computing it");
  auto t = std::make_unique<transfer>();
  t->what = a;
  t->buffer = std::move(it->second);
  outputs_.erase(it);
  const int v = a.chunk * pp_ + pp_rank_;
  // An activation feeds virtual stage v + 1; a gradient goes back to virtual stage v - 1.
  t->peer = ctx_.pipeline_rank_of(gradient ? (pp_rank_ + pp_ - 1) % pp_ : (pp_rank_ + 1) % pp_);
  const int consumer = gradient ? v - 1 : v + 1;
  transfer* raw = t.get();
  sends_.push_back(std::move(t));
  ctx_.transport()->send(raw->peer, tag(gradient, consumer, a.microbatch), raw->buffer.data(),
                         raw->buffer.size() * sizeof(float), completion_of(raw));
}

stage_engine::transfer* stage_engine::arrived(const action& a, bool gradient) {
  auto it = recvs_.find({gradient, a.microbatch, a.chunk});
  if (it == recvs_.end())
    throw std::logic_error(std::string("schedule runs ") + op_name(a.kind) + " of micro-batch " +
                           std::to_string(a.microbatch) + " without receiving its input");
  if (!it->second->done.load(std::memory_order_acquire)) return nullptr;
  check(*it->second);
  return it->second.get();
}

// Runs one action; false when it must wait for a transfer (the action stays pending).
bool stage_engine::execute(const action& a) {
  auto& chunk = chunks_[a.chunk];
  const auto& layout = chunk.layout();
  switch (a.kind) {
    case op::recv_forward: post_recv(a, false); return true;
    case op::recv_backward: post_recv(a, true); return true;
    case op::send_forward: post_send(a, false); return true;
    case op::send_backward: post_send(a, true); return true;
    case op::forward:
    case op::backward: break;
  }
  const bool forward = a.kind == op::forward;
  sync_params();  // --overlap-param-gather: the updated parameters must have arrived
  transfer* input = nullptr;
  if (forward ? !layout.pre_process : !layout.post_process) {
    input = arrived(a, /*gradient=*/!forward);
    if (!input) {
      if (!wait_start_) {
        wait_start_ = clock_type::now();
        const int v = a.chunk * pp_ + pp_rank_;
        const int peer_stage = forward ? (pp_rank_ + pp_ - 1) % pp_ : (pp_rank_ + 1) % pp_;
        set_activity(std::string("awaiting ") + (forward ? "recv_forward" : "recv_backward") + " mb " +
                     std::to_string(a.microbatch) + " chunk " + std::to_string(a.chunk) + " from rank " +
                     std::to_string(ctx_.pipeline_rank_of(peer_stage)) + " (virtual stage " +
                     std::to_string(forward ? v - 1 : v + 1) + ")");
      }
      return false;
    }
  }
  const auto start = clock_type::now();
  if (wait_start_) {
    timeline_.push_back({a, std::chrono::duration<double>(*wait_start_ - schedule_start_).count(),
                         std::chrono::duration<double>(start - schedule_start_).count(), true});
    if (!forward_only_)
      timers_.add(forward ? step_timer::forward_recv : step_timer::backward_recv,
                  std::chrono::duration<double>(start - *wait_start_).count());
    wait_start_.reset();
  }
  set_activity(std::string(forward ? "forward" : "backward") + " mb " + std::to_string(a.microbatch) + " chunk " +
               std::to_string(a.chunk));
  const std::size_t n = chunk.activation_numel(mbs_);
  if (forward) {
    const auto& b = batch(a.microbatch);
    float scale = 0.0f;
    if (layout.post_process && !forward_only_) {
      double count = 0;
      for (float m : b.loss_mask) count += m;
      // Megatron divides each micro-batch's loss by its token count and by the micro-batch count.
      scale = count > 0 ? static_cast<float>(1.0 / (count * num_microbatches_)) : 0.0f;
    }
    tensor::host_vector<float> output;
    if (!layout.post_process) output.resize(n);
    // The same dropout masks as one process: the micro-batch's index in the global sample order.
    const std::uint64_t step = static_cast<std::uint64_t>(consumed_ / mbs_ + a.microbatch * dp_ + dp_rank_);
    const auto r = chunk.forward(a.microbatch, b.view(), input ? input->buffer.data() : nullptr,
                                 output.empty() ? nullptr : output.data(), !forward_only_, !forward_only_, scale, step);
    if (layout.post_process) {
      totals_.loss_sum += r.loss_sum;
      totals_.num_tokens += r.num_tokens;
    } else {
      outputs_[{false, a.microbatch, a.chunk}] = std::move(output);
    }
    if (input) recvs_.erase({false, a.microbatch, a.chunk});
  } else {
    tensor::host_vector<float> grad_input;
    if (!layout.pre_process) grad_input.resize(n);
    // The chunk's last backward of the iteration reduces each bucket as soon as it is complete.
    std::function<void(int)> progress;
    if (comm_ && a.microbatch == num_microbatches_ - 1)
      progress = [this, c = a.chunk](int event) { launch_ready_buckets(c, event); };
    chunk.backward(a.microbatch, input ? input->buffer.data() : nullptr, grad_input.empty() ? nullptr : grad_input.data(),
                   progress);
    if (!layout.pre_process) outputs_[{true, a.microbatch, a.chunk}] = std::move(grad_input);
    if (input) recvs_.erase({true, a.microbatch, a.chunk});
  }
  const auto end = clock_type::now();
  timeline_.push_back({a, std::chrono::duration<double>(start - schedule_start_).count(),
                       std::chrono::duration<double>(end - schedule_start_).count(), false});
  if (!forward_only_)
    timers_.add(forward ? step_timer::forward_compute : step_timer::backward_compute,
                std::chrono::duration<double>(end - start).count());
  return true;
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
  for (auto& t : sends_) {
    if (!t->done.load(std::memory_order_acquire)) {
      set_activity("flushing send of mb " + std::to_string(t->what.microbatch) + " chunk " +
                   std::to_string(t->what.chunk) + " to rank " + std::to_string(t->peer));
      return false;
    }
    check(*t);
  }
  sends_.clear();
  if (!recvs_.empty() || !outputs_.empty())
    throw std::logic_error("the schedule finished with " + std::to_string(recvs_.size()) + " receives and " +
                           std::to_string(outputs_.size()) + " sends unmatched");
  schedule_.reset();
  batches_.clear();
  {
    std::lock_guard lock(activity_mutex_);
    last_timeline_ = std::move(timeline_);
    activity_ = "idle";
    activity_since_ = clock_type::now();
  }
  timeline_.clear();
  return true;
}

void stage_engine::zero_grad() {
  for (auto& c : chunks_) c.zero_grad();
}

void stage_engine::finalize_grads() {
  if (!buckets_.empty()) {
    // --overlap-grad-reduce: the buckets were posted during the last backward; post any left
    // (a chunk without micro-batches) and wait for them all. The sequence-parallel sum over the
    // tensor-parallel group comes after the data-parallel mean here (both are sums: the same).
    {
      // What is left of the data-parallel sync (Megatron's finish_grad_sync). The tied-embedding
      // sums went with their buckets: there is no separate embedding-grads-all-reduce to time.
      const auto timed = timers_.time(step_timer::all_grads_sync);
      launch_ready_buckets(-1, std::numeric_limits<int>::min());
      next_bucket_ = 0;
      wait_background("the overlapped gradient reduction");
    }
    for (auto& c : chunks_) c.all_reduce_sequence_parallel_grads();
    return;
  }
  // Sequence parallelism: norm weights and row-parallel biases saw only this rank's positions;
  // their gradients are summed over the tensor-parallel group (Megatron's _allreduce_layernorm_grads).
  for (auto& c : chunks_) c.all_reduce_sequence_parallel_grads();
  // Tied embeddings: the first stage's embedding and the last stage's copy get the sum of both
  // gradients (Megatron's _allreduce_word_embedding_grads), before the data-parallel mean.
  // Megatron times both parts on every rank, whether or not there is anything to reduce.
  {
    const auto timed = timers_.time(step_timer::embedding_grads_all_reduce);
    if (auto* emb = ctx_.embedding(); emb && !chunks_.front().config().untie_embeddings_and_output_weights) {
      auto& chunk = is_first_stage() ? chunks_.front() : chunks_.back();
      auto& p = chunk.store()[chunk.word_embeddings_id()];
      emb->all_reduce(std::span<float>(p.grad, p.numel));
    }
  }
  const auto timed = timers_.time(step_timer::all_grads_sync);
  if (!ctx_.data_parallel()) return;
  for (std::size_t c = 0; c < chunks_.size(); ++c) reduce_over_replicas(c, 0, chunks_[c].store().grads().size());
}

void stage_engine::reduce_stats(std::span<double> values) {
  if (auto* mp = ctx_.model_parallel()) mp->all_reduce(values);
  if (distributed_optimizer_) ctx_.data_parallel()->all_reduce(values);
}

model::optimizer_step_result stage_engine::optimizer_step(double clip_grad, bool count_zeros) {
  set_activity("optimizer step");
  const auto timed = timers_.time(step_timer::optimizer);
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
  // Megatron's distributed optimizer times its all-gather even over one replica.
  // (With --overlap-param-gather it times the posting only, as Megatron's does.)
  std::optional<step_timers::scope> gather_timer;
  if (args_.distributed.use_distributed_optimizer) gather_timer.emplace(timers_, step_timer::params_all_gather);
  if (distributed_optimizer_) {
    // Every replica gets the updated slices of every other (Megatron's parameter all-gather),
    // in the background with --overlap-param-gather until the next forward needs them.
    for (std::size_t c = 0; c < chunks_.size(); ++c) {
      auto gather = [this, c] {
        auto& s = shards_[c];
        auto values = chunks_[c].store().values();
        tensor::host_vector<float> mine(s.end - s.begin, 0.0f);
        for (std::size_t i = s.begin; i < std::min(s.end, s.numel); ++i) mine[i - s.begin] = values[i];
        ctx_.data_parallel()->all_gather(std::span<const float>(mine), std::span<float>(s.scratch));
        std::copy_n(s.scratch.begin(), s.numel, values.begin());
      };
      if (overlap_param_gather_)
        comm_->post(gather);
      else
        gather();
    }
    params_pending_ = overlap_param_gather_;
  }
  set_activity("idle");
  return result;
}

void stage_engine::sync_params() {
  if (!params_pending_) return;
  wait_background("the overlapped parameter all-gather");
  params_pending_ = false;
}

double stage_engine::params_norm() {
  sync_params();
  return model::params_norm(optimizer_->params(), [this](std::span<double> v) { reduce_stats(v); });
}

}  // namespace mactor::training

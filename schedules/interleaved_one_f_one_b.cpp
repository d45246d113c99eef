// Interleaved 1F1B: the order of compute and transfers that Megatron-Core core_v0.15.0 issues.
#include "schedules/interleaved_one_f_one_b.hpp"

#include <algorithm>
#include <optional>
#include <vector>

namespace mactor::schedules {
namespace {

// Everything the coroutine looks up, computed once: which (microbatch, chunk) the k-th forward
// and the k-th backward run, and which receive each step posts.
class interleaved_plan {
 public:
  explicit interleaved_plan(const schedule_shape& s)
      : pp_(s.pipeline_model_parallel_size), vp_(s.virtual_pipeline_model_parallel_size),
        first_(is_first_rank(s)), last_(is_last_rank(s)) {
    const int m = s.num_microbatches;
    const int g = microbatch_group_size(s);
    for (int start = 0; start < m; start += g) {
      const int end = std::min(start + g, m);
      for (int chunk = 0; chunk < vp_; ++chunk)
        for (int mb = start; mb < end; ++mb) order_.push_back({mb, chunk});
    }
    warmup_ = warmup_microbatches(s);
  }

  int total() const { return static_cast<int>(order_.size()); }
  int warmup() const { return warmup_; }
  int remaining() const { return total() - warmup_; }
  bool all_in_warmup() const { return warmup_ == total(); }
  bool first() const { return first_; }
  bool last() const { return last_; }

  action forward(int k) const { return {op::forward, order_[k].mb, order_[k].chunk}; }
  action backward(int k) const { return {op::backward, order_[k].mb, vp_ - 1 - order_[k].chunk}; }

  // The last virtual stage keeps its output (the loss); the first keeps its input gradient.
  bool sends_forward(int k) const { return !(last_ && order_[k].chunk == vp_ - 1); }
  bool sends_backward(int k) const { return !(first_ && order_[k].chunk == vp_ - 1); }

  // The activation received after forward k, named by the forward that will consume it. Rank 0
  // receives from the last rank, which runs the same order pp - 1 steps behind, into the next
  // chunk; every other rank receives the input of its own next forward.
  std::optional<action> recv_after_forward(int k) const {
    if (!first_) return with_kind(forward(k + 1), op::recv_forward);
    if (k < pp_ - 1) return std::nullopt;
    const action from = forward(k - (pp_ - 1));
    if (from.chunk == vp_ - 1) return std::nullopt;
    return action{op::recv_forward, from.microbatch, from.chunk + 1};
  }

  // The mirror image for gradients: the last rank leads the backward direction.
  std::optional<action> recv_after_backward(int k) const {
    if (!last_) return with_kind(backward(k + 1), op::recv_backward);
    if (k < pp_ - 1) return std::nullopt;
    const action from = backward(k - (pp_ - 1));
    if (from.chunk == 0) return std::nullopt;
    return action{op::recv_backward, from.microbatch, from.chunk - 1};
  }

  action recv_first_backward() const { return with_kind(backward(0), op::recv_backward); }
  action send_forward(int k) const { return with_kind(forward(k), op::send_forward); }
  action send_backward(int k) const { return with_kind(backward(k), op::send_backward); }

 private:
  static action with_kind(action a, op kind) {
    a.kind = kind;
    return a;
  }
  struct slot {
    int mb;
    int chunk;
  };
  int pp_;
  int vp_;
  bool first_;
  bool last_;
  int warmup_ = 0;
  std::vector<slot> order_;
};

}  // namespace

generator<action> interleaved_one_f_one_b(schedule_shape s) {
  const interleaved_plan plan(s);
  const int total = plan.total();
  const int warmup = plan.warmup();
  const int remaining = plan.remaining();
  const bool backward_pass = !s.forward_only;

  if (!plan.first()) co_yield action{op::recv_forward, 0, 0};

  const bool prefetch_forward = s.overlap_p2p_comm_warmup_flush && !plan.first();
  for (int k = 0; k < warmup; ++k) {
    // The input of forward k + 1 arrives with the send of forward k's output, or (warmup flush)
    // its receive is posted before forward k runs.
    std::optional<action> recv = k == total - 1 ? std::nullopt : plan.recv_after_forward(k);
    if (recv && prefetch_forward) co_yield *recv;
    co_yield plan.forward(k);
    if (recv && !prefetch_forward) co_yield *recv;
    if (plan.sends_forward(k)) co_yield plan.send_forward(k);
    // The first backward's gradient is requested together with the last warmup send.
    if (k == warmup - 1 && backward_pass && !plan.all_in_warmup() && !plan.last())
      co_yield plan.recv_first_backward();
  }

  for (int k = 0; k < remaining; ++k) {
    const int fwd = warmup + k;
    const bool last_step = k == remaining - 1;
    std::optional<action> recv_f = last_step ? std::nullopt : plan.recv_after_forward(fwd);
    std::optional<action> recv_b = plan.recv_after_backward(k);
    co_yield plan.forward(fwd);
    if (s.overlap_p2p_comm && s.combined_1f1b) {
      // Megatron's combined step waits for both inputs, runs the pair, then posts the forward
      // direction's exchange and the backward direction's.
      co_yield plan.backward(k);
      if (recv_f) co_yield *recv_f;
      if (plan.sends_forward(fwd)) co_yield plan.send_forward(fwd);
      if (plan.sends_backward(k)) co_yield plan.send_backward(k);
      if (recv_b) co_yield *recv_b;
    } else if (s.overlap_p2p_comm) {
      // With overlap, each compute is followed by its own exchange.
      if (recv_f) co_yield *recv_f;
      if (plan.sends_forward(fwd)) co_yield plan.send_forward(fwd);
      co_yield plan.backward(k);
      if (plan.sends_backward(k)) co_yield plan.send_backward(k);
      if (recv_b) co_yield *recv_b;
    } else {
      // Without overlap, one batched exchange follows the forward-backward pair.
      co_yield plan.backward(k);
      if (plan.sends_backward(k)) co_yield plan.send_backward(k);
      if (recv_f) co_yield *recv_f;
      if (plan.sends_forward(fwd)) co_yield plan.send_forward(fwd);
      if (recv_b) co_yield *recv_b;
    }
  }

  if (!backward_pass) co_return;
  if (plan.all_in_warmup() && !plan.last())
    co_yield plan.recv_first_backward();
  const bool prefetch_backward = s.overlap_p2p_comm_warmup_flush && !plan.last();
  for (int k = remaining; k < total; ++k) {
    std::optional<action> recv = k == total - 1 ? std::nullopt : plan.recv_after_backward(k);
    if (recv && prefetch_backward) co_yield *recv;
    co_yield plan.backward(k);
    if (plan.sends_backward(k)) co_yield plan.send_backward(k);
    if (recv && !prefetch_backward) co_yield *recv;
  }
}

}  // namespace mactor::schedules

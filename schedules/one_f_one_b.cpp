// 1F1B: the order of compute and transfers that Megatron-Core core_v0.15.0 issues on each rank.
#include "schedules/one_f_one_b.hpp"

#include <algorithm>

namespace mactor::schedules {

generator<action> one_f_one_b(schedule_shape s) {
  const int m = s.num_microbatches;
  const bool first = is_first_rank(s);
  const bool last = is_last_rank(s);
  // The last stage has no one downstream to wait for, so its warmup is zero: it can start
  // backward as soon as its first forward finishes.
  const int warmup = std::min(s.pipeline_model_parallel_size - s.pipeline_rank - 1, m);
  const int remaining = m - warmup;

  for (int mb = 0; mb < warmup; ++mb) {
    if (!first) co_yield action{op::recv_forward, mb, 0};
    co_yield action{op::forward, mb, 0};
    if (!last) co_yield action{op::send_forward, mb, 0};
  }
  // The steady state starts with an input in hand, so its first receive comes before the loop.
  if (remaining > 0 && !first) co_yield action{op::recv_forward, warmup, 0};

  for (int i = 0; i < remaining; ++i) {
    const int fwd = warmup + i;
    const bool last_iteration = i == remaining - 1;
    co_yield action{op::forward, fwd, 0};
    if (s.forward_only) {
      if (!last) co_yield action{op::send_forward, fwd, 0};
      if (!last_iteration && !first) co_yield action{op::recv_forward, fwd + 1, 0};
      continue;
    }
    if (!last) {
      co_yield action{op::send_forward, fwd, 0};
      co_yield action{op::recv_backward, i, 0};
    }
    co_yield action{op::backward, i, 0};
    if (!first) {
      co_yield action{op::send_backward, i, 0};
      if (!last_iteration) co_yield action{op::recv_forward, fwd + 1, 0};
    }
  }

  if (s.forward_only) co_return;
  for (int mb = remaining; mb < m; ++mb) {
    if (!last) co_yield action{op::recv_backward, mb, 0};
    co_yield action{op::backward, mb, 0};
    if (!first) co_yield action{op::send_backward, mb, 0};
  }
}

}  // namespace mactor::schedules

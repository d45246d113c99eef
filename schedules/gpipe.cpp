// GPipe: fill the whole pipeline with forwards, then drain it with backwards.
#include "schedules/gpipe.hpp"

namespace mactor::schedules {

generator<action> gpipe(schedule_shape s) {
  const bool first = is_first_rank(s);
  const bool last = is_last_rank(s);
  for (int mb = 0; mb < s.num_microbatches; ++mb) {
    if (!first) co_yield action{op::recv_forward, mb, 0};
    co_yield action{op::forward, mb, 0};
    if (!last) co_yield action{op::send_forward, mb, 0};
  }
  if (s.forward_only) co_return;
  for (int mb = 0; mb < s.num_microbatches; ++mb) {
    if (!last) co_yield action{op::recv_backward, mb, 0};
    co_yield action{op::backward, mb, 0};
    if (!first) co_yield action{op::send_backward, mb, 0};
  }
}

}  // namespace mactor::schedules

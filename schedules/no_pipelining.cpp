// Gradient accumulation: each microbatch's backward follows its forward at once.
#include "schedules/no_pipelining.hpp"

namespace mactor::schedules {

generator<action> no_pipelining(schedule_shape s) {
  if (s.combined_1f1b && !s.forward_only) {
    for (int mb = 0; mb < s.num_microbatches; ++mb) {
      co_yield action{op::forward, mb, 0};
      if (mb > 0) co_yield action{op::backward, mb - 1, 0};
    }
    co_yield action{op::backward, s.num_microbatches - 1, 0};
    co_return;
  }
  for (int mb = 0; mb < s.num_microbatches; ++mb) {
    co_yield action{op::forward, mb, 0};
    if (!s.forward_only) co_yield action{op::backward, mb, 0};
  }
}

}  // namespace mactor::schedules

// ZB-H1: 1F1B's actions with a weight-gradient pass inserted r backwards after its backward.
#include "schedules/zero_bubble_h1.hpp"

#include "schedules/one_f_one_b.hpp"

namespace mactor::schedules {

generator<action> zero_bubble_h1(schedule_shape s) {
  const int lag = s.pipeline_rank;
  int backwards = 0, weights = 0;
  auto one_f_one_b_actions = one_f_one_b(s);
  while (auto a = one_f_one_b_actions.next()) {
    if (is_compute(a->kind) && backwards - weights > lag) co_yield action{op::backward_weight, weights++, 0};
    co_yield *a;
    if (a->kind == op::backward) ++backwards;
  }
  while (weights < backwards) co_yield action{op::backward_weight, weights++, 0};
}

}  // namespace mactor::schedules

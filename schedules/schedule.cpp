// Schedule dispatch: Megatron's get_forward_backward_func, plus GPipe.
#include "schedules/schedule.hpp"

#include <stdexcept>
#include <string>

#include "schedules/gpipe.hpp"
#include "schedules/interleaved_one_f_one_b.hpp"
#include "schedules/no_pipelining.hpp"
#include "schedules/one_f_one_b.hpp"
#include "schedules/zero_bubble_h1.hpp"
#include "schedules/zero_bubble_v.hpp"
#include "schedules/dual_pipe_v.hpp"

namespace mactor::schedules {

generator<action> make_schedule(schedule_shape s) {
  if (auto errors = validate(s); !errors.empty()) {
    std::string text;
    for (const auto& e : errors) text += (text.empty() ? "" : "\n") + e;
    throw std::invalid_argument(text);
  }
  switch (resolved_kind(s)) {
    case schedule_kind::no_pipelining: return no_pipelining(s);
    case schedule_kind::one_f_one_b: return one_f_one_b(s);
    case schedule_kind::interleaved_one_f_one_b: return interleaved_one_f_one_b(s);
    case schedule_kind::gpipe: return gpipe(s);
    case schedule_kind::zero_bubble_h1: return zero_bubble_h1(s);
    case schedule_kind::zero_bubble_v: return zero_bubble_v(s);
    case schedule_kind::dual_pipe_v: return dual_pipe_v(s);
    case schedule_kind::megatron: break;
  }
  throw std::logic_error("resolved_kind returned 'megatron'");
}

}  // namespace mactor::schedules

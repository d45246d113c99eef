// Names and levels of mactor's training timers, as megatron-core's timer calls give them.
#include "training/step_timers.hpp"

#include "training/trace_recorder.hpp"

namespace mactor::training {
namespace {

struct timer_info {
  std::string_view name;
  int level;
};

// Indexed by step_timer. Levels: schedules.py, p2p_communication.py, finalize_model_grads.py,
// optimizer.py, distrib_optimizer.py and training.py (train_step) of core_v0.15.0.
constexpr timer_info infos[num_step_timers] = {
    {"forward-backward", 1},
    {"forward-compute", 2},
    {"backward-compute", 2},
    {"forward-recv", 2},
    {"backward-recv", 2},
    {"embedding-grads-all-reduce", 1},
    {"all-grads-sync", 1},
    {"params-all-gather", 1},
    {"optimizer-copy-to-main-grad", 1},
    {"optimizer-unscale-and-check-inf", 1},
    {"optimizer-clip-main-grad", 1},
    {"optimizer-count-zeros", 1},
    {"optimizer-inner-step", 1},
    {"optimizer-copy-main-to-model-params", 1},
    {"optimizer", 1},
};
static_assert(static_cast<std::size_t>(step_timer::optimizer) + 1 == num_step_timers);

}  // namespace

std::string_view step_timer_name(step_timer t) { return infos[static_cast<std::size_t>(t)].name; }
int step_timer_level(step_timer t) { return infos[static_cast<std::size_t>(t)].level; }

void step_timers::add(step_timer t, clock::time_point since) {
  const auto now = clock::now();
  add(t, std::chrono::duration<double>(now - since).count());
  if (trace_ && trace_->active())
    trace_->span(std::string(step_timer_name(t)), t == step_timer::forward_backward ? "step"
                                                  : t >= step_timer::optimizer_copy_to_main_grad ? "optimizer"
                                                                                                 : "grad_sync",
                 since, now);
}

std::vector<double> step_timers::take() {
  std::vector<double> out;
  bool any = false;
  for (std::size_t t = 0; t < num_step_timers; ++t) any = any || enabled(static_cast<step_timer>(t));
  if (!any) return out;
  out.assign(seconds_.begin(), seconds_.end());
  seconds_.fill(0.0);
  return out;
}

}  // namespace mactor::training

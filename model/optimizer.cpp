// The optimizer base, its factory from Megatron's flags, and Megatron's fp32 step order.
#include "model/optimizer.hpp"

#include <stdexcept>
#include <utility>

#include "model/optimizer_adam.hpp"
#include "model/optimizer_sgd.hpp"

namespace mactor::model {

optimizer::optimizer(std::vector<optim_param> params, std::vector<param_group> groups)
    : params_(std::move(params)), groups_(std::move(groups)) {
  for (const param_group& g : groups_)
    for (std::size_t i : g.params)
      if (i >= params_.size())
        throw std::invalid_argument("optimizer: a param group refers to param " +
                                    std::to_string(i) + " of only " +
                                    std::to_string(params_.size()) +
                                    "; build the groups with make_param_groups");
}

std::optional<optimizer_kind> parse_optimizer_kind(std::string_view text) {
  if (text == "adam") return optimizer_kind::adam;
  if (text == "sgd") return optimizer_kind::sgd;
  return std::nullopt;
}

std::unique_ptr<optimizer> make_optimizer(std::vector<optim_param> params,
                                          const optimizer_options& options) {
  param_group_defaults defaults{options.lr, options.min_lr, options.decoupled_lr,
                                options.decoupled_min_lr, options.weight_decay};
  std::vector<param_group> groups = make_param_groups(params, defaults);
  if (options.optimizer == optimizer_kind::adam) {
    adam_options adam{options.adam_beta1, options.adam_beta2, options.adam_eps,
                      options.decoupled_weight_decay, options.exp_avg_dtype, options.exp_avg_sq_dtype};
    return std::make_unique<adam_optimizer>(std::move(params), std::move(groups), adam);
  }
  sgd_options sgd{options.sgd_momentum, 0.0, false};
  return std::make_unique<sgd_optimizer>(std::move(params), std::move(groups), sgd);
}

optimizer_step_result clip_and_step(optimizer& opt, double clip_grad, bool count_zeros,
                                    const sum_reducer& reduce, const step_part_runner& run) {
  const auto part = [&](step_part which, const std::function<void()>& work) {
    if (run)
      run(which, work);
    else
      work();
  };
  optimizer_step_result result;
  part(step_part::clip_main_grad, [&] {
    if (clip_grad > 0.0) result.grad_norm = clip_grad_norm(opt.params(), clip_grad, reduce);
  });
  part(step_part::count_zeros, [&] {
    if (count_zeros) result.num_zeros_in_grad = count_zeros_in_grads(opt.params(), reduce);
  });
  part(step_part::inner_step, [&] { opt.step(); });
  return result;
}

}  // namespace mactor::model

// Parameter groups as Megatron-Core builds them (megatron/core/optimizer/__init__.py).
#include "model/optimizer_param.hpp"

#include <algorithm>
#include <stdexcept>

namespace mactor::model {

std::vector<param_group> make_param_groups(std::span<const optim_param> params,
                                           const param_group_defaults& defaults) {
  std::vector<param_group> groups;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const optim_param& p = params[i];
    if (p.numel > 0 && (p.value == nullptr || p.grad == nullptr))
      throw std::invalid_argument("optimizer parameter '" + p.name +
                                  "' has no value or grad buffer; give it both before building "
                                  "the optimizer");
    if (p.decoupled_lr && !defaults.decoupled_lr)
      throw std::invalid_argument("optimizer parameter '" + p.name +
                                  "' asks for the decoupled learning rate but --decoupled-lr is "
                                  "not set; set --decoupled-lr or clear the param's flag");
    const double wd_mult = p.no_weight_decay ? 0.0 : p.wd_mult;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const param_group& g) {
      return g.wd_mult == wd_mult && g.lr_mult == p.lr_mult && g.decoupled_lr == p.decoupled_lr;
    });
    if (it == groups.end()) {
      param_group g;
      g.wd_mult = wd_mult;
      g.lr_mult = p.lr_mult;
      g.decoupled_lr = p.decoupled_lr;
      if (p.decoupled_lr) {
        g.max_lr = *defaults.decoupled_lr;
        g.min_lr = defaults.decoupled_min_lr.value_or(defaults.min_lr);
      } else {
        g.max_lr = defaults.lr;
        g.min_lr = defaults.min_lr;
      }
      // torch gives every group the optimizer's default lr and weight decay until the
      // scheduler's first step overwrites them.
      g.lr = defaults.lr;
      g.weight_decay = defaults.weight_decay;
      groups.push_back(g);
      it = groups.end() - 1;
    }
    it->params.push_back(i);
  }
  return groups;
}

namespace {
std::optional<double> last_lr(std::span<const param_group> groups, bool decoupled) {
  std::optional<double> lr;
  for (const param_group& g : groups)
    if (!g.params.empty() && g.decoupled_lr == decoupled) lr = g.lr;
  return lr;
}
}  // namespace

std::optional<double> logged_learning_rate(std::span<const param_group> groups) {
  return last_lr(groups, false);
}

std::optional<double> logged_decoupled_learning_rate(std::span<const param_group> groups) {
  return last_lr(groups, true);
}

void zero_grads(std::span<const optim_param> params) {
  for (const optim_param& p : params) std::fill(p.grad, p.grad + p.numel, 0.0f);
}

}  // namespace mactor::model
